package datalayout

import (
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
)

// labelMeFile is a LabelMe JSON file as labelme 5 saves it, with one
// rectangle per label.
func labelMeFile(imagePath, imageData string, w, h int, labels ...string) string {
	data := "null"
	if imageData != "" {
		data = `"` + imageData + `"`
	}
	var shapes []string
	for i, l := range labels {
		shapes = append(shapes, `{"label": "`+l+`", "points": [[`+string(rune('0'+i))+`, 0], [`+string(rune('0'+i))+`, 2]], "group_id": null, "description": "", "shape_type": "rectangle", "flags": {}, "mask": null}`)
	}
	return `{"version": "5.5.0", "flags": {}, "shapes": [` + strings.Join(shapes, ", ") + `], "imagePath": "` + imagePath +
		`", "imageData": ` + data + `, "imageHeight": ` + string(rune('0'+h)) + `, "imageWidth": ` + string(rune('0'+w)) + `}`
}

// A flat LabelMe folder: JSONs beside their images or in a folder of
// their own reaching the images by ../; classes from the labels found,
// which the summary says; unpaired files named.
func TestLabelMeLayout(t *testing.T) {
	root := t.TempDir()
	writeImageFile(t, filepath.Join(root, "a.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	writeImageFile(t, filepath.Join(root, "extra.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	writeImageFile(t, filepath.Join(root, "photos", "b.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	png, err := os.ReadFile(filepath.Join(root, "a.png"))
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, filepath.Join(root, "a.json"), labelMeFile("a.png", base64.StdEncoding.EncodeToString(png), 4, 3, "dog", "cat"))
	writeText(t, filepath.Join(root, "b.json"), labelMeFile("photos/b.png", "", 4, 3, "cat"))
	writeText(t, filepath.Join(root, "c.json"), labelMeFile("gone.png", "", 4, 3))
	f, err := Detect(root)
	if err != nil || f.Name() != "labelme" {
		t.Fatalf("detected %v, %v", f, err)
	}
	set, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Samples) != 2 || !slices.Equal(set.Classes, []string{"_background_", "cat", "dog"}) {
		t.Fatalf("samples %+v, classes %v", set.Samples, set.Classes)
	}
	if !strings.Contains(set.Summary(), "labelme layout: 2 image/mask pairs, 2 unmatched files; classes: _background_, then the labels found, sorted (no labels.txt)") {
		t.Errorf("summary %q", set.Summary())
	}
	// Rectangles [0,0]-[0,2] (dog) and [1,0]-[1,2] (cat).
	if got, want := labelsOf(t, set.Samples[0]), []int32{2, 1, 0, 0, 2, 1, 0, 0, 2, 1, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("a: mask %v, want %v", got, want)
	}
	if s := set.Samples[1]; s.Image != filepath.Join(root, "photos", "b.png") || s.Mask != filepath.Join(root, "b.json") {
		t.Errorf("b: %+v", s)
	}
	if len(set.Unmatched) != 2 || !strings.Contains(set.Unmatched[0].Path, "extra.png") || !strings.Contains(set.Unmatched[1].Why, "c.json (imagePath), but the image file is missing") {
		t.Errorf("unmatched %+v", set.Unmatched)
	}
	// The mask goes through the same checks as a mask file: size.
	if _, err := set.Samples[0].ReadMask(imageio.MaskOptions{Width: 5, Height: 3}); err == nil || !strings.Contains(err.Error(), "a.json") {
		t.Errorf("size check: %v", err)
	}
}

// Splits are train/ and val/ folders of LabelMe files; labels.txt in the
// data folder orders the classes, and a label it lacks stops the listing
// naming the file.
func TestLabelMeSplitsAndLabelsFile(t *testing.T) {
	root := t.TempDir()
	for _, split := range []string{"train", "val"} {
		writeImageFile(t, filepath.Join(root, split, "a.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
		writeText(t, filepath.Join(root, split, "a.json"), labelMeFile("a.png", "", 4, 3, "road"))
	}
	writeText(t, filepath.Join(root, "labels.txt"), "__ignore__\n_background_\ncar\nroad\n")
	_, splits, err := Splits(root, Options{})
	if err != nil || !slices.Equal(splits, []string{"train", "val"}) {
		t.Fatalf("splits %v, %v", splits, err)
	}
	set, err := Open(root, Options{Split: "validation"})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != "labelme" || set.Split != "val" || !slices.Equal(set.Classes, []string{"_background_", "car", "road"}) ||
		!strings.Contains(set.Summary(), "classes from "+filepath.Join(root, "labels.txt")) {
		t.Fatalf("%s: classes %v", set.Summary(), set.Classes)
	}
	if got := labelsOf(t, set.Samples[0]); got[0] != 2 {
		t.Errorf("mask %v, want road = 2 at the left", got)
	}
	writeText(t, filepath.Join(root, "labels.txt"), "_background_\ncar\n")
	_, err = Open(root, Options{Split: "train"})
	var e *annot.Error
	if !errors.As(err, &e) || e.File != filepath.Join(root, "train", "a.json") || !strings.Contains(err.Error(), `label "road" is not in `+filepath.Join(root, "labels.txt")) {
		t.Errorf("label missing from labels.txt: %v", err)
	}
}

// A folder of images with JSON files that are not LabelMe's (a COCO file
// as Roboflow exports it, a Label Studio export) is not taken for LabelMe.
func TestLabelMeDetectionLeavesOtherJSON(t *testing.T) {
	coco := t.TempDir()
	writeImageFile(t, filepath.Join(coco, "a.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	writeText(t, filepath.Join(coco, "_annotations.coco.json"), `{"images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 3}], "annotations": [], "categories": []}`)
	if (labelMe{}).Detect(coco) != "" {
		t.Error("a COCO file taken for LabelMe")
	}
	if _, err := Detect(coco); !errors.Is(err, ErrUnknownLayout) {
		t.Errorf("detected %v", err)
	}
	// A LabelMe folder whose first JSON is another file (a config sorted
	// first) is still one; that file is named, not read as LabelMe.
	mixed := t.TempDir()
	writeImageFile(t, filepath.Join(mixed, "a.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	writeText(t, filepath.Join(mixed, "0_config.json"), `{"model": "unet"}`)
	writeText(t, filepath.Join(mixed, "a.json"), labelMeFile("a.png", "", 4, 3, "cat"))
	if f, err := Detect(mixed); err != nil || f.Name() != "labelme" {
		t.Fatalf("a LabelMe folder with another JSON first: detected %v, %v", f, err)
	}
	set, err := Open(mixed, Options{})
	if err != nil || len(set.Samples) != 1 || len(set.Unmatched) != 1 || !strings.Contains(set.Unmatched[0].Why, "no LabelMe file") {
		t.Fatalf("mixed folder: %v, %+v", err, set)
	}
	ls := t.TempDir()
	writeText(t, filepath.Join(ls, "project-1-at-2026-11-26-10-00-0f1e2d3c.json"), `[{"id": 1, "data": {"image": "a.png"}, "annotations": []}]`)
	if f, err := Detect(ls); err != nil || f.Name() != "labelstudio" {
		t.Errorf("Label Studio export detected as %v, %v", f, err)
	}
}

// Open sorts every format's samples by name, as Set promises, whatever
// the files that name them are called (here LabelMe files 0.json, 1.json
// naming zeta.png, alpha.png).
func TestOpenSortsSamplesByName(t *testing.T) {
	root := t.TempDir()
	for i, img := range []string{"zeta.png", "alpha.png"} {
		writeImageFile(t, filepath.Join(root, img), image.NewGray(image.Rect(0, 0, 4, 3)))
		writeText(t, filepath.Join(root, fmt.Sprintf("%d.json", i)), labelMeFile(img, "", 4, 3, "cat"))
	}
	set, err := Open(root, Options{Format: "labelme"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range set.Samples {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"alpha", "zeta"}) {
		t.Errorf("samples %v, want alpha then zeta", names)
	}
}
