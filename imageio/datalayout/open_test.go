package datalayout

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// OpenDefault takes the fallback split only where the layout has it and
// no split is asked for; a layout without splits reads its one set.
func TestOpenDefault(t *testing.T) {
	split := t.TempDir()
	touch(t, split, "images/train/a.jpg", "masks/train/a.png", "images/val/b.jpg", "masks/val/b.png")
	flat := t.TempDir()
	touch(t, flat, "images/c.jpg", "masks/c.png", "images/d.jpg")
	for _, c := range []struct {
		root, split, fallback string
		want                  []string
		desc                  string
	}{
		{split, "", "val", []string{"b"}, split + " (folders, split val)"},
		{split, "train", "val", []string{"a"}, split + " (folders, split train)"},
		{flat, "", "train", []string{"c"}, flat + " (folders)"},
	} {
		set, err := OpenDefault(c.root, Options{Split: c.split}, c.fallback)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names(set), c.want) || set.Description() != c.desc {
			t.Errorf("split %q, fallback %q: %v %q; want %v %q", c.split, c.fallback, names(set), set.Description(), c.want, c.desc)
		}
		if imgs := set.Images(); len(imgs) != 1 || filepath.Base(imgs[0]) != c.want[0]+".jpg" {
			t.Errorf("Images() = %v", imgs)
		}
	}
	var se *SplitError
	if _, err := OpenDefault(split, Options{}, "test"); !errors.As(err, &se) {
		t.Errorf("no split and no fallback split: %v, want a SplitError", err)
	}
}

// PairFolders pairs two folders by name and refuses a file without its pair.
func TestPairFolders(t *testing.T) {
	root := t.TempDir()
	touch(t, root, "img/a.jpg", "img/b.jpg", "lab/a.png", "lab/b.png")
	got, err := PairFolders(filepath.Join(root, "img"), filepath.Join(root, "lab"))
	if err != nil || len(got) != 2 || got[1].Mask != filepath.Join(root, "lab", "b.png") {
		t.Fatalf("PairFolders = %+v, %v", got, err)
	}
	touch(t, root, "img/c.jpg")
	if _, err := PairFolders(filepath.Join(root, "img"), filepath.Join(root, "lab")); err == nil {
		t.Error("an image without a mask was paired")
	}
}
