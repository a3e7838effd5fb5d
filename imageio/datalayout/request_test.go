package datalayout

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// flag names a setting as a CLI would.
func flag(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// The user's layout, label map and palette are refused by key as usage
// errors, before any folder is read.
func TestLayoutAndMasksRefusedByKey(t *testing.T) {
	if opt, err := (Layout{Format: "coco", Split: "val", Crowd: "class"}).Options(); err != nil || !opt.CrowdAsClass || opt.Format != "coco" || opt.Split != "val" {
		t.Errorf("class: %+v, %v", opt, err)
	}
	if opt, err := (Layout{}).Options(); err != nil || opt.CrowdAsClass {
		t.Errorf("default: %+v, %v", opt, err)
	}
	_, err := Layout{Crowd: "maybe"}.Options()
	if setting.ExitCode(err) != 2 || setting.Rename(err, flag).Error() != `--coco-crowd "maybe": must be ignore or class` {
		t.Errorf("crowd maybe: %v (exit %d)", err, setting.ExitCode(err))
	}
	if _, _, err := ReadMasks("9,10:1;*:0", ""); err != nil {
		t.Errorf("a good label map: %v", err)
	}
	var se *setting.Error
	if _, _, err := ReadMasks("nonsense", ""); setting.ExitCode(err) != 2 || !errors.As(err, &se) || se.Setting != "label_map" {
		t.Errorf("bad label map: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "palette.png")
	if _, _, err := ReadMasks("", missing); setting.ExitCode(err) != 2 || !errors.As(err, &se) || se.Setting != "mask_palette" || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing palette: %v", err)
	}
}

// OpenData refuses a URL and a folder that is no data set as usage
// errors of data; files that pair with nothing are the data's fault
// (status 1). Notes name settings the caller's way, after its prefix.
func TestOpenDataRefusalsAndNotes(t *testing.T) {
	if _, err := OpenData("s3://bucket/data", Options{}, "val", false, Notes{}); setting.ExitCode(err) != 2 ||
		setting.Rename(err, flag).Error() != "--data s3://bucket/data: this command reads a local folder; copy the data set first (segtune finetune mirrors a URL itself)" {
		t.Errorf("URL: %v", err)
	}
	if _, err := OpenData(filepath.Join(t.TempDir(), "none"), Options{}, "val", false, Notes{}); setting.ExitCode(err) != 2 || !strings.HasPrefix(err.Error(), "data: ") {
		t.Errorf("missing folder: %v", err)
	}
	root := t.TempDir()
	touch(t, root, "images/a.jpg", "masks/a.png", "images/lonely.jpg")
	var notes bytes.Buffer
	set, err := OpenData(root, Options{}, "val", false, Notes{W: &notes, Prefix: "p: ", Name: flag})
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(notes.String()), "\n"); len(lines) == 0 || lines[0] != "p: "+set.Summary() {
		t.Errorf("notes %q, want the summary after the prefix", notes.String())
	}
	if err := DataError(set.Err()); setting.ExitCode(err) != 1 || !strings.HasPrefix(err.Error(), "data: ") || !strings.Contains(err.Error(), "lonely") {
		t.Errorf("unmatched: %v (exit %d)", err, setting.ExitCode(err))
	}
	if err := DataError(errors.New("unreadable")); setting.ExitCode(err) != 2 {
		t.Errorf("unreadable: exit %d", setting.ExitCode(err))
	}
	Notes{}.Printf("nowhere %d", 1) // no writer: no panic
}

// ConvertFolder stops at unmatched files or an output inside the data
// before anything is written; SplitFolder names an overlap its own way.
func TestConvertAndSplitRefuseFirst(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	touch(t, data, "images/a.jpg", "masks/a.png", "images/lonely.jpg")
	out := filepath.Join(root, "out")
	n, err := ConvertFolder(ConvertRequest{Folder: Folder{Data: data}, Out: out})
	if n != 0 || setting.ExitCode(err) != 1 || !strings.HasPrefix(err.Error(), "data: ") || !strings.Contains(err.Error(), "lonely") {
		t.Errorf("unmatched: %d, %v", n, err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused conversion wrote its output folder")
	}
	if _, err := ConvertFolder(ConvertRequest{Folder: Folder{Data: data}, Out: filepath.Join(data, "out")}); setting.ExitCode(err) != 2 {
		t.Errorf("output inside the data: %v (exit %d)", err, setting.ExitCode(err))
	}
	err = SplitFolder(&bytes.Buffer{}, SplitRequest{Folder: Folder{Data: data}, Out: data, Split: ValSplit{Fraction: 0.5, By: "image"}})
	want := "--out " + data + " and --data " + data + " overlap: choose an output folder outside the data"
	if setting.ExitCode(err) != 2 || setting.Rename(err, flag).Error() != want {
		t.Errorf("split overlap: %v", err)
	}
	if err := SplitFolder(&bytes.Buffer{}, SplitRequest{Folder: Folder{Data: data, LabelMap: "nonsense"}, Out: out}); setting.ExitCode(err) != 2 {
		t.Errorf("split, bad label map: %v", err)
	}
}
