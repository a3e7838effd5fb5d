package datalayout

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// Without a split asked for, every split of the layout is opened, in the
// layout's order; with one, that one alone; a layout without splits is
// one set.
func TestOpenSplits(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "images/train/a.jpg", "masks/train/a.png", "images/val/b.jpg", "masks/val/b.png", "images/val/c.jpg")
	split := func(opt Options) []string {
		t.Helper()
		sets, err := OpenSplits(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range sets {
			got = append(got, s.Split+":"+names(s)[0])
		}
		return got
	}
	if got := split(Options{}); !slices.Equal(got, []string{"train:a", "val:b"}) {
		t.Errorf("every split: %v", got)
	}
	if got := split(Options{Split: "val"}); !slices.Equal(got, []string{"val:b"}) {
		t.Errorf("--split val: %v", got)
	}
	flat := t.TempDir()
	touch(t, flat, "images/a.jpg", "masks/a.png")
	if sets, err := OpenSplits(flat, Options{}); err != nil || len(sets) != 1 || sets[0].Split != "" {
		t.Errorf("no splits: %v, %v", sets, err)
	}
	var se *SplitError
	if _, err := OpenSplits(root, Options{Split: "test"}); !errors.As(err, &se) {
		t.Errorf("a split the layout lacks: %v", err)
	}
}

// A conversion's output may be neither the data folder, nor inside it,
// nor hold it (also through a symbolic link), nor hold files.
func TestCheckConvertOutput(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	touch(t, data, "images/a.jpg", "masks/a.png")
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{data, filepath.Join(data, "out"), root, filepath.Join(link, "new")} {
		var oe *OverlapError
		if err := CheckConvertOutput(data, out); !errors.As(err, &oe) || oe.Out != out || oe.Data != data {
			t.Errorf("output %s: %v, want an OverlapError", out, err)
		}
	}
	full := t.TempDir()
	touch(t, full, "x.txt")
	var ne *NotEmptyError
	if err := CheckConvertOutput(data, full); !errors.As(err, &ne) || err.Error() != "out "+full+" is not empty; give a new or empty folder" {
		t.Errorf("a folder holding files: %v", err)
	}
	file := filepath.Join(full, "x.txt")
	var se *setting.Error
	if err := CheckConvertOutput(data, file); !errors.As(err, &se) || se.Setting != "out" || se.Value != file {
		t.Errorf("a file: %v", err)
	}
	if err := CheckConvertOutput(data, filepath.Join(t.TempDir(), "new")); err != nil {
		t.Errorf("a new folder: %v", err)
	}
}

// A data folder none of whose splits holds a pair is refused, saying
// which layout was found.
func TestRequirePairs(t *testing.T) {
	if err := RequirePairs("d", []*Set{{Format: "voc"}}); err == nil || err.Error() != "data d: a voc layout, and not one image/mask pair in it" {
		t.Errorf("an empty voc set: %v", err)
	}
	if err := RequirePairs("d", nil); err == nil || err.Error() != "data d: no layout, and not one image/mask pair in it" {
		t.Errorf("no set: %v", err)
	}
	if err := RequirePairs("d", []*Set{{}, {Samples: []Sample{{}}}}); err != nil {
		t.Errorf("a split with a pair: %v", err)
	}
}
