package imageio

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPairDataset(t *testing.T) {
	root := t.TempDir()
	imgs, masks := filepath.Join(root, "images"), filepath.Join(root, "masks")
	for _, d := range []string{imgs, masks, filepath.Join(imgs, "sub.png")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"b.jpg", "a.PNG", "c.png", "notes.txt", ".hidden.png"} {
		writeTemp(t, imgs, n, nil)
	}
	for _, n := range []string{"a.png", "b.png", "z.png", ".a.png.tmp-1"} {
		writeTemp(t, masks, n, nil)
	}
	list, err := ListImages(imgs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(imgs, "a.PNG"), filepath.Join(imgs, "b.jpg"), filepath.Join(imgs, "c.png")}
	if !slices.Equal(list, want) {
		t.Fatalf("ListImages = %v, want %v", list, want)
	}
	p, err := PairDataset(imgs, masks)
	if err != nil {
		t.Fatal(err)
	}
	wantPairs := []Pair{
		{filepath.Join(imgs, "a.PNG"), filepath.Join(masks, "a.png")},
		{filepath.Join(imgs, "b.jpg"), filepath.Join(masks, "b.png")},
	}
	if !slices.Equal(p.Pairs, wantPairs) {
		t.Fatalf("pairs %v", p.Pairs)
	}
	if !slices.Equal(p.ImagesWithoutMask, []string{filepath.Join(imgs, "c.png")}) ||
		!slices.Equal(p.MasksWithoutImage, []string{filepath.Join(masks, "z.png")}) {
		t.Fatalf("unmatched: %v / %v", p.ImagesWithoutMask, p.MasksWithoutImage)
	}
	err = p.Err()
	if err == nil || !strings.Contains(err.Error(), "1 image(s) without a mask") || !strings.Contains(err.Error(), "c.png") ||
		!strings.Contains(err.Error(), "z.png") {
		t.Fatalf("Err() = %v", err)
	}
	if (&Pairing{Pairs: wantPairs}).Err() != nil {
		t.Fatal("complete pairing reports an error")
	}

	writeTemp(t, imgs, "a.jpg", nil)
	if _, err := PairDataset(imgs, masks); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("duplicate base name: %v", err)
	}
	if _, err := PairDataset(filepath.Join(root, "nope"), masks); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("missing folder: %v", err)
	}
}

func TestPairingErrTruncates(t *testing.T) {
	var p Pairing
	for i := 0; i < 8; i++ {
		p.ImagesWithoutMask = append(p.ImagesWithoutMask, string(rune('a'+i))+".png")
	}
	msg := p.Err().Error()
	if !strings.Contains(msg, "8 image(s)") || !strings.Contains(msg, "and 3 more") || strings.Contains(msg, "h.png") {
		t.Fatalf("message %q", msg)
	}
}

// Names pair as spelled, on every system; an image and a mask whose names
// differ only in case (a set made where case is ignored) are named
// together in the error, as datalayout names them (#45).
func TestPairingNamesCaseOnlyDifferences(t *testing.T) {
	root := t.TempDir()
	imgs, masks := filepath.Join(root, "images"), filepath.Join(root, "masks")
	os.MkdirAll(imgs, 0o755)
	os.MkdirAll(masks, 0o755)
	writeTemp(t, imgs, "Frame1.JPG", nil)
	writeTemp(t, imgs, "frame2.jpg", nil)
	writeTemp(t, masks, "frame1.png", nil)
	writeTemp(t, masks, "frame2.png", nil)
	p, err := PairDataset(imgs, masks)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Pairs) != 1 {
		t.Errorf("pairs %v, want frame2 alone", p.Pairs)
	}
	want := filepath.Join(imgs, "Frame1.JPG") + " and " + filepath.Join(masks, "frame1.png") + " differ only in case"
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one containing %q", err, want)
	}
}
