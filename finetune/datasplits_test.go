package finetune

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio/datalayout"
)

func touchFiles(t *testing.T, root string, files ...string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// OpenData trains on train and validates on val where the layout has
// them, validates on nothing when val is what it trains on, and stops at
// unmatched files unless told to skip them.
func TestOpenData(t *testing.T) {
	root := t.TempDir()
	touchFiles(t, root, "images/train/a.jpg", "masks/train/a.png", "images/val/b.jpg", "masks/val/b.png")
	fd, err := OpenData(root, datalayout.Options{}, false)
	want := DataSpec{Data: root, Format: "folders", Split: "train"}
	if err != nil || fd.Train != want || fd.Val.Split != "val" || len(fd.Sets) != 2 {
		t.Fatalf("OpenData = %+v, %v", fd, err)
	}
	if fd, err = OpenData(root, datalayout.Options{Split: "val"}, false); err != nil || fd.Val.Given() || fd.Train.Split != "val" {
		t.Fatalf("training on val: %+v, %v", fd, err)
	}
	touchFiles(t, root, "images/val/lonely.jpg")
	var ue *datalayout.UnmatchedError
	if fd, err = OpenData(root, datalayout.Options{}, false); !errors.As(err, &ue) || len(fd.Sets) != 2 {
		t.Errorf("an unmatched validation image: %v (sets %d)", err, len(fd.Sets))
	}
	if _, err = OpenData(root, datalayout.Options{}, true); err != nil {
		t.Errorf("skipping bad files: %v", err)
	}
}

// Folders come in pairs, and validation folders do not go with a held-out
// share of the training data; the folders given set the data, a held-out
// share validating on the training folders.
func TestFolders(t *testing.T) {
	vs := &datalayout.ValSplit{Fraction: 0.2, By: "image"}
	for want, c := range map[string]struct {
		f  Folders
		vs *datalayout.ValSplit
	}{
		"train_images and train_masks go together": {Folders{TrainImages: "i"}, nil},
		"val_images and val_masks go together":     {Folders{ValMasks: "m"}, nil},
		"val_split and val_images":                 {Folders{ValImages: "i", ValMasks: "m"}, vs},
	} {
		if err := c.f.Check(c.vs); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", c.f, err, want)
		}
	}
	var cfg Config
	f := Folders{TrainImages: "ti", TrainMasks: "tm"}
	if err := f.Check(vs); err != nil {
		t.Fatal(err)
	}
	f.Apply(&cfg, vs)
	if cfg.Train.Images != "ti" || cfg.Train.ValSplit != vs || !cfg.Val.HeldOut || cfg.Val.Masks != "tm" {
		t.Errorf("train folders with a held-out share: %+v", cfg)
	}
}
