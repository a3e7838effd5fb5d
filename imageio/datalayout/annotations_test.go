package datalayout

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
)

func writeImageFile(t *testing.T, path string, img image.Image) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func labelsOf(t *testing.T, s Sample) []int32 {
	t.Helper()
	m, err := s.ReadMask(imageio.MaskOptions{Width: 4, Height: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m.Labels
}

// A COCO folder is found by its annotations/*.json; a split's images are
// found in SPLIT/; polygons are rendered as masks with the categories as
// classes; images the file does not annotate are named.
func TestCOCOLayout(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "annotations", "instances_val.json"), `{
	 "images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 3}],
	 "categories": [{"id": 7, "name": "cat"}],
	 "annotations": [{"id": 1, "image_id": 1, "category_id": 7, "iscrowd": 0, "segmentation": [[0, 0, 2, 0, 2, 3, 0, 3]]}]}`)
	writeImageFile(t, filepath.Join(root, "val", "a.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	writeImageFile(t, filepath.Join(root, "val", "extra.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	f, err := Detect(root)
	if err != nil || f.Name() != "coco" {
		t.Fatalf("detected %v, %v", f, err)
	}
	set, err := Open(root, Options{Split: "val"})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Samples) != 1 || !slices.Equal(set.Classes, []string{"background", "cat"}) {
		t.Fatalf("samples %+v, classes %v", set.Samples, set.Classes)
	}
	// Pixel centres x+½ inside [0, 2): columns 0 and 1 are the cat.
	want := []int32{1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0}
	if got := labelsOf(t, set.Samples[0]); !slices.Equal(got, want) {
		t.Errorf("mask %v, want %v", got, want)
	}
	if len(set.Unmatched) != 1 || filepath.Base(set.Unmatched[0].Path) != "extra.png" {
		t.Errorf("unmatched %+v, want extra.png", set.Unmatched)
	}
	// The mask goes through the same checks as a mask file: size.
	if _, err := set.Samples[0].ReadMask(imageio.MaskOptions{Width: 5, Height: 3}); err == nil {
		t.Error("a 4x3 annotation was accepted for a 5x3 image")
	}
}

// A CVAT export has VOC's folders but is read as colour masks with
// labelmap.txt's classes, not as VOC.
func TestCVATLayout(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "labelmap.txt"), "# label:color_rgb:parts:actions\nbackground:0,0,0::\ncar:250,50,83::\n")
	mask := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for y := 0; y < 3; y++ {
		for x := 0; x < 4; x++ {
			mask.Set(x, y, color.RGBA{A: 255})
		}
	}
	mask.Set(3, 2, color.RGBA{250, 50, 83, 255})
	writeImageFile(t, filepath.Join(root, "SegmentationClass", "f0.png"), mask)
	writeImageFile(t, filepath.Join(root, "JPEGImages", "f0.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	set, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != "cvat" || len(set.Samples) != 1 || !slices.Equal(set.Classes, []string{"background", "car"}) {
		t.Fatalf("format %s, samples %+v, classes %v", set.Format, set.Samples, set.Classes)
	}
	if got := labelsOf(t, set.Samples[0]); got[11] != 1 || slices.Max(got[:11]) != 0 {
		t.Errorf("mask %v, want car at the last pixel only", got)
	}
}

// CVAT's "CVAT for images" export: annotations.xml and images/; a
// polygon is drawn as a mask, and an image the XML does not list is named.
func TestCVATXMLLayout(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "annotations.xml"), `<?xml version="1.0" encoding="utf-8"?>
<annotations><version>1.1</version>
<meta><task><labels><label><name>car</name></label></labels></task></meta>
<image id="0" name="a/f0.png" width="4" height="3"><polygon label="car" points="2,0;4,0;4,3;2,3" occluded="0" z_order="0"/></image>
</annotations>`)
	writeImageFile(t, filepath.Join(root, "images", "a", "f0.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	writeImageFile(t, filepath.Join(root, "images", "extra.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	set, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != "cvat-xml" || len(set.Samples) != 1 || set.Samples[0].Name != "a/f0" || !slices.Equal(set.Classes, []string{"background", "car"}) {
		t.Fatalf("format %s, samples %+v, classes %v", set.Format, set.Samples, set.Classes)
	}
	if want := []int32{0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1}; !slices.Equal(labelsOf(t, set.Samples[0]), want) {
		t.Errorf("mask %v, want %v", labelsOf(t, set.Samples[0]), want)
	}
	if len(set.Unmatched) != 1 || !strings.HasSuffix(set.Unmatched[0].Path, "extra.png") {
		t.Errorf("unmatched %+v, want extra.png", set.Unmatched)
	}
}

// A CVAT project export names each image's subset and keeps its images
// in images/SUBSET/: the subsets are the splits.
func TestCVATXMLSubsetsAreSplits(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "annotations.xml"), `<?xml version="1.0" encoding="utf-8"?>
<annotations><version>1.1</version>
<meta><project><labels><label><name>car</name></label></labels></project></meta>
<image id="0" name="f0.png" subset="Train" task_id="1" width="4" height="3"><box label="car" xtl="0" ytl="0" xbr="2" ybr="3"/></image>
<image id="1" name="f1.png" subset="Validation" task_id="2" width="4" height="3"></image>
<image id="2" name="f2.png" subset="Train" task_id="1" width="4" height="3"></image>
</annotations>`)
	for _, f := range []string{"Train/f0.png", "Train/f2.png", "Validation/f1.png"} {
		writeImageFile(t, filepath.Join(root, "images", filepath.FromSlash(f)), image.NewGray(image.Rect(0, 0, 4, 3)))
	}
	_, splits, err := Splits(root, Options{})
	if err != nil || !slices.Equal(splits, []string{"Train", "Validation"}) {
		t.Fatalf("splits %q, %v; want Train, Validation", splits, err)
	}
	set, err := Open(root, Options{Split: "val"})
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Samples) != 1 || set.Samples[0].Name != "f1" || len(set.Unmatched) != 0 {
		t.Errorf("val: samples %+v, unmatched %+v; want f1 alone", set.Samples, set.Unmatched)
	}
	if set, err = Open(root, Options{Split: "train"}); err != nil || len(set.Samples) != 2 {
		t.Fatalf("train: %+v, %v", set, err)
	}
	if want := []int32{1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0}; !slices.Equal(labelsOf(t, set.Samples[0]), want) {
		t.Errorf("f0 %v, want %v", labelsOf(t, set.Samples[0]), want)
	}
}

// A Label Studio export beside its images: the brush masks of the
// annotated tasks, and the tasks without annotation named.
func TestLabelStudioLayout(t *testing.T) {
	root := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "imageio", "annot", "testdata", "labelstudio_export.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeText(t, filepath.Join(root, "project-1-at-2026-11-26-10-00-0f1e2d3c.json"), string(data))
	for name, size := range map[string][2]int{"a1b2c3d4-small.png": {20, 15}, "e5f6a7b8-large.jpg": {200, 150},
		"c9d0e1f2-dot.png": {1, 1}, "0a0b0c0d-cancel.png": {6, 4}} {
		writeImageFile(t, filepath.Join(root, "images", name), image.NewGray(image.Rect(0, 0, size[0], size[1])))
	}
	set, err := Open(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != "labelstudio" || len(set.Samples) != 4 || set.Classes[0] != "background" {
		t.Fatalf("format %s, %d samples, classes %v", set.Format, len(set.Samples), set.Classes)
	}
	if len(set.Unmatched) != 1 || !strings.Contains(set.Unmatched[0].Path, "todo") {
		t.Errorf("unmatched %+v, want the unannotated task", set.Unmatched)
	}
	for _, s := range set.Samples {
		if _, err := s.ReadMask(imageio.MaskOptions{}); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
	}
}

// A crowd annotation is ignored unless Options.CrowdAsClass paints it with
// its category's class.
func TestCOCOCrowdOption(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "annotations", "instances_val.json"), `{
	 "images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 3}],
	 "categories": [{"id": 7, "name": "cat"}],
	 "annotations": [{"id": 1, "image_id": 1, "category_id": 7, "iscrowd": 1, "segmentation": [[0, 0, 2, 0, 2, 3, 0, 3]]}]}`)
	writeImageFile(t, filepath.Join(root, "val", "a.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	const I = 255 // annot.Ignore
	for _, tc := range []struct {
		asClass bool
		want    []int32
	}{
		{false, []int32{I, I, 0, 0, I, I, 0, 0, I, I, 0, 0}},
		{true, []int32{1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0}},
	} {
		set, err := Open(root, Options{Split: "val", CrowdAsClass: tc.asClass})
		if err != nil {
			t.Fatal(err)
		}
		if got := labelsOf(t, set.Samples[0]); !slices.Equal(got, tc.want) {
			t.Errorf("CrowdAsClass %v: mask %v, want %v", tc.asClass, got, tc.want)
		}
	}
}

// TestCVATSubsetsAreSplits: a CVAT export's subsets, listed in
// ImageSets/Segmentation, are its splits; one with its default subset
// alone (every export has it) is read whole, as before.
func TestCVATSubsetsAreSplits(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "labelmap.txt"), "# label:color_rgb:parts:actions\nbackground:0,0,0::\ncar:250,50,83::\n")
	mask := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for _, id := range []string{"f0", "f1", "f2"} {
		writeImageFile(t, filepath.Join(root, "SegmentationClass", id+".png"), mask)
		writeImageFile(t, filepath.Join(root, "JPEGImages", id+".png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	}
	writeImageFile(t, filepath.Join(root, "JPEGImages", "f3.png"), image.NewGray(image.Rect(0, 0, 4, 3))) // not annotated
	sets := filepath.Join(root, "ImageSets", "Segmentation")
	writeText(t, filepath.Join(sets, "default.txt"), "f0\nf1\nf2\nf3\n")
	set, err := Open(root, Options{})
	if err != nil || len(set.Samples) != 3 || set.Split != "" {
		t.Fatalf("default subset alone: %v, %+v", err, set)
	}
	os.Remove(filepath.Join(sets, "default.txt"))
	writeText(t, filepath.Join(sets, "train.txt"), "f0\nf2\n")
	writeText(t, filepath.Join(sets, "val.txt"), "f1\nf3\nf9\n")
	_, splits, err := Splits(root, Options{})
	if err != nil || !slices.Equal(splits, []string{"train", "val"}) {
		t.Fatalf("splits %v, %v", splits, err)
	}
	train, err := Open(root, Options{Split: "train"})
	if err != nil {
		t.Fatal(err)
	}
	if names := sampleNames(train); !slices.Equal(names, []string{"f0", "f2"}) || len(train.Unmatched) != 0 || train.Format != "cvat" {
		t.Errorf("train: %v, unmatched %+v", names, train.Unmatched)
	}
	val, err := OpenDefault(root, Options{}, "val")
	if err != nil {
		t.Fatal(err)
	}
	if names := sampleNames(val); !slices.Equal(names, []string{"f1"}) || len(val.Unmatched) != 2 {
		t.Errorf("val: %v, unmatched %+v (want f3 without annotation and f9 listed)", names, val.Unmatched)
	}
	if _, err := Open(root, Options{}); err == nil {
		t.Error("no --split of an export with train and val subsets was taken as the whole set")
	}
}

func sampleNames(s *Set) []string {
	var names []string
	for _, x := range s.Samples {
		names = append(names, x.Name)
	}
	return names
}

// COCO images of one base name in two sub-folders (file_name "a/x.png"
// and "b/x.png") are two samples with two names, so that eval's partial
// files, which key images by name, hold both.
func TestCOCOSubfolderNamesAreDistinct(t *testing.T) {
	root := t.TempDir()
	writeText(t, filepath.Join(root, "annotations", "instances_val.json"), `{
	 "images": [{"id": 1, "file_name": "a/x.png", "width": 4, "height": 3}, {"id": 2, "file_name": "b/x.png", "width": 4, "height": 3}],
	 "categories": [{"id": 7, "name": "cat"}],
	 "annotations": [{"id": 1, "image_id": 1, "category_id": 7, "iscrowd": 0, "segmentation": [[0, 0, 2, 0, 2, 3, 0, 3]]},
	                 {"id": 2, "image_id": 2, "category_id": 7, "iscrowd": 0, "segmentation": [[0, 0, 2, 0, 2, 3, 0, 3]]}]}`)
	for _, d := range []string{"a", "b"} {
		writeImageFile(t, filepath.Join(root, "val", d, "x.png"), image.NewGray(image.Rect(0, 0, 4, 3)))
	}
	set, err := Open(root, Options{Split: "val"})
	if err != nil {
		t.Fatal(err)
	}
	if names := sampleNames(set); !slices.Equal(names, []string{"a/x", "b/x"}) {
		t.Errorf("names %q, want a/x and b/x", names)
	}
}
