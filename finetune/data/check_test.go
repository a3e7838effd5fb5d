package data

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio/datalayout"
)

// Check names a mask with a label outside the classes, and counts the
// other pairs' classes from their masks: a class's pixels, the images it
// is in, and its share of each image's labelled pixels.
func TestCheckNamesBadFilesAndCountsClasses(t *testing.T) {
	root := t.TempDir()
	img := coordImage(10, 10, 0)
	// a: class 1 in the left half (50 %); b: class 1 in one row (10 %).
	writePNG(t, filepath.Join(root, "images/train/a.png"), img)
	writePNG(t, filepath.Join(root, "masks/train/a.png"), grayMask(10, 10, func(x, _ int) uint8 { return uint8(x / 5) }))
	writePNG(t, filepath.Join(root, "images/train/b.png"), img)
	writePNG(t, filepath.Join(root, "masks/train/b.png"), grayMask(10, 10, func(_, y int) uint8 { return uint8(min(y, 1) ^ 1) }))
	writePNG(t, filepath.Join(root, "images/train/c.png"), img)
	writePNG(t, filepath.Join(root, "masks/train/c.png"), grayMask(10, 10, func(int, int) uint8 { return 7 }))
	writePNG(t, filepath.Join(root, "images/train/lonely.png"), img)
	set, err := datalayout.Open(root, datalayout.Options{Split: "train"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), set, Config{NumClasses: 2, Ignore: 255, ClassNames: []string{"bg", "fg"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Pairs != 2 || len(r.Unmatched) != 1 || len(r.Problems) != 1 || r.Bad() != 2 {
		t.Fatalf("pairs %d, unmatched %v, problems %v", r.Pairs, r.Unmatched, r.Problems)
	}
	if p := r.Problems[0]; !strings.HasSuffix(p.Path, "c.png") || !strings.Contains(p.Error, "7") {
		t.Errorf("problem %+v does not name c.png's label 7", p)
	}
	if len(r.Classes) != 2 {
		t.Fatalf("classes %+v", r.Classes)
	}
	fg := r.Classes[1]
	if fg.Name != "fg" || fg.Pixels != 60 || fg.Images != 2 || fg.Size == nil || fg.Size.Min != 0.1 || fg.Size.Max != 0.5 {
		t.Errorf("class fg %+v size %+v; want 60 pixels in 2 images, sizes 0.1 to 0.5", fg, fg.Size)
	}
	if bg := r.Classes[0]; bg.Pixels != 140 || bg.Images != 2 {
		t.Errorf("class bg %+v; want 140 pixels in 2 images", bg)
	}
}

// CheckFolder checks every split of a data folder: the reports come back
// with the error that fails the folder (the files named), an empty folder
// fails naming its layout, and a label map that cannot be read stops it
// before any report as a usage error.
func TestCheckFolder(t *testing.T) {
	root := t.TempDir()
	img := coordImage(4, 4, 0)
	for _, split := range []string{"train", "val"} {
		writePNG(t, filepath.Join(root, "images", split, "a.png"), img)
		writePNG(t, filepath.Join(root, "masks", split, "a.png"), grayMask(4, 4, func(x, _ int) uint8 { return uint8(x / 2) }))
	}
	writePNG(t, filepath.Join(root, "masks/val/b.png"), grayMask(4, 4, func(int, int) uint8 { return 9 }))
	var notes strings.Builder
	r := CheckRequest{Folder: datalayout.Folder{Data: root, Notes: datalayout.Notes{W: &notes}}, ClassNames: []string{"bg", "fg"}, Check: Config{NumClasses: 2, Ignore: 255}}
	reports, err := CheckFolder(context.Background(), r)
	if len(reports) != 2 || reports[0].Bad() != 0 || reports[1].Bad() != 1 || reports[0].Classes[1].Name != "fg" {
		t.Fatalf("reports %+v", reports)
	}
	if err == nil || err.Error() != "data check: 1 files named above need attention" {
		t.Errorf("a folder with an unmatched mask: %v", err)
	}
	if strings.Count(notes.String(), "\n") < 2 {
		t.Errorf("notes %q: want a line for each split", notes.String())
	}
	r.Layout.Split = "train"
	if reports, err := CheckFolder(context.Background(), r); len(reports) != 1 || err != nil {
		t.Errorf("the good split: %d reports, %v", len(reports), err)
	}
	empty := t.TempDir()
	for _, d := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(empty, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r = CheckRequest{Folder: datalayout.Folder{Data: empty}}
	if reports, err := CheckFolder(context.Background(), r); reports == nil || err == nil || !strings.Contains(err.Error(), "not one image/mask pair") {
		t.Errorf("no pair: %v, %v", reports, err)
	}
	r.LabelMap = "nonsense"
	var exit interface{ ExitCode() int }
	if reports, err := CheckFolder(context.Background(), r); reports != nil || !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Errorf("bad label map: %v, %v", reports, err)
	}
}
