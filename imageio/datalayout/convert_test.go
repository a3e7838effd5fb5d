package datalayout

import (
	"bytes"
	"errors"
	"image"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/segtune/segtune/imageio"
)

// A Cityscapes folder converted: images byte for byte, labels through
// the label map as palette PNGs, in canonical split folders; a repeated
// base name takes its sub-folder; a non-empty output or an unmatched file
// stops it before anything is written.
func TestConvert(t *testing.T) {
	root := t.TempDir()
	mask := image.NewGray(image.Rect(0, 0, 4, 3))
	for i := range mask.Pix {
		mask.Pix[i] = uint8([]int{7, 26, 0}[i%3]) // road, car, unlabelled
	}
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	for _, city := range []string{"aachen", "bonn"} {
		writeImageFile(t, filepath.Join(root, "leftImg8bit/val", city, "x_leftImg8bit.png"), img)
		writeImageFile(t, filepath.Join(root, "gtFine/val", city, "x_gtFine_labelIds.png"), mask)
	}
	set, err := Open(root, Options{Split: "val"})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := imageio.ParseLabelMap("cityscapes")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "new")
	var seen []int
	got, err := Convert([]*Set{set}, out, imageio.MaskOptions{Map: lm}, func(_ ConvertedSplit, done, _ int) { seen = append(seen, done) })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Split != "val" || got[0].Pairs != 2 || !slices.Equal(seen, []int{0, 1, 2}) {
		t.Fatalf("Convert = %+v, progress %v", got, seen)
	}
	src, _ := os.ReadFile(set.Samples[0].Image)
	copied, err := os.ReadFile(filepath.Join(out, "images/val/aachen_x.png"))
	if err != nil || !bytes.Equal(src, copied) {
		t.Fatalf("image not copied as it is: %v", err)
	}
	m, err := imageio.ReadMask(filepath.Join(out, "masks/val/bonn_x.png"), imageio.MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{0, 13, 255}; !slices.Equal(m.Labels[:3], want) { // cityscapes train ids
		t.Errorf("mask labels %v, want %v", m.Labels[:3], want)
	}

	var ne *NotEmptyError
	if _, err := Convert([]*Set{set}, out, imageio.MaskOptions{}, nil); !errors.As(err, &ne) {
		t.Errorf("into a non-empty folder: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "gtFine/val/bonn/x_gtFine_labelIds.png")); err != nil {
		t.Fatal(err)
	}
	if set, err = Open(root, Options{Split: "val"}); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	var ue *UnmatchedError
	if _, err := Convert([]*Set{set}, fresh, imageio.MaskOptions{}, nil); !errors.As(err, &ue) {
		t.Errorf("with an unmatched image: %v", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unmatched file stopped the conversion after it wrote %s", fresh)
	}
}
