package data

import (
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// writePNG encodes img to path, creating folders.
func writePNG(t testing.TB, path string, img image.Image) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// coordImage has R = x, G = y and B = blue: each pixel names its place.
func coordImage(w, h int, blue uint8) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, color.RGBA{uint8(x), uint8(y), blue, 0xff})
		}
	}
	return img
}

// grayMask builds a single-channel mask from a labelling function.
func grayMask(w, h int, label func(x, y int) uint8) *image.Gray {
	m := image.NewGray(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetGray(x, y, color.Gray{label(x, y)})
		}
	}
	return m
}

// blockLabel is the test masks' labelling: 25-pixel blocks, 8 per row.
func blockLabel(x, y int) uint8 { return uint8(x/25 + 8*(y/25)) }

// blockClasses is the number of classes blockLabel produces for ≤200×150.
const blockClasses = 48

// makeSet writes n coordinate images of w×h with block masks under
// root/images/train and root/masks/train and returns root.
func makeSet(t testing.TB, n, w, h int) string {
	t.Helper()
	root := t.TempDir()
	for i := range n {
		name := string(rune('a'+i)) + ".png"
		writePNG(t, filepath.Join(root, "images", "train", name), coordImage(w, h, uint8(100+i)))
		writePNG(t, filepath.Join(root, "masks", "train", name), grayMask(w, h, blockLabel))
	}
	return root
}

// openSet opens the train split of root with blockLabel's classes.
func openSet(t testing.TB, root string, mod func(*Config)) *Dataset {
	t.Helper()
	cfg := Config{
		ImageDir:   filepath.Join(root, "images", "train"),
		MaskDir:    filepath.Join(root, "masks", "train"),
		NumClasses: blockClasses,
	}
	if mod != nil {
		mod(&cfg)
	}
	ds, problems, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	return ds
}

// collect returns every batch of a loader until io.EOF, closing it.
func collect(t testing.TB, ds *Dataset, cfg LoaderConfig) []*Batch {
	t.Helper()
	l, err := NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var out []*Batch
	for {
		b, err := l.Next(context.Background())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
}

// checkNoLeak fails if goroutines started after before are still running.
func checkNoLeak(t testing.TB, before int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}
