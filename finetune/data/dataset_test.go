package data

import (
	"bytes"
	"context"
	"github.com/segtune/segtune/metrics"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
)

func TestOpenPairsAndCaches(t *testing.T) {
	root := makeSet(t, 3, 200, 150)
	ds := openSet(t, root, nil)
	if ds.Len() != 3 || ds.NumClasses() != blockClasses || ds.Ignore() != 255 {
		t.Fatalf("len %d classes %d ignore %d", ds.Len(), ds.NumClasses(), ds.Ignore())
	}
	n, bytes := ds.Cached()
	if n != 3 || bytes != 3*4*200*150 {
		t.Fatalf("cached %d examples, %d bytes", n, bytes)
	}
	e, ok := ds.Example(1)
	if !ok || filepath.Base(e.Image) != "b.png" || e.Width != 200 || e.Height != 150 || !e.Cached {
		t.Fatalf("example 1: %+v", e)
	}
	s, err := ds.Load(1)
	if err != nil {
		t.Fatal(err)
	}
	// Pixel (7, 5): R = 7, G = 5, B = 101; label of block (0, 0) = 0.
	i := 5*200 + 7
	if got := s.RGB[3*i : 3*i+3]; got[0] != 7 || got[1] != 5 || got[2] != 101 || s.Labels[i] != 0 {
		t.Fatalf("pixel (7,5) = %v label %d", got, s.Labels[i])
	}
	if _, ok := ds.Example(3); ok {
		t.Fatal("example 3 exists")
	}
	if _, err := ds.Load(-1); err == nil {
		t.Fatal("Load(-1) succeeded")
	}
}

func TestCacheBudgetDecodesOnTheFly(t *testing.T) {
	root := makeSet(t, 3, 200, 150)
	cached := openSet(t, root, nil)
	// Room for exactly one example.
	partial := openSet(t, root, func(c *Config) { c.CacheBytes = 4*200*150 + 10 })
	none := openSet(t, root, func(c *Config) { c.CacheBytes = -1 })
	if n, _ := partial.Cached(); n != 1 {
		t.Fatalf("partial cache holds %d examples, want 1", n)
	}
	if n, b := none.Cached(); n != 0 || b != 0 {
		t.Fatalf("disabled cache holds %d examples (%d bytes)", n, b)
	}
	for id := range 3 {
		want, _ := cached.Load(id)
		for _, ds := range []*Dataset{partial, none} {
			got, err := ds.Load(id)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.RGB, want.RGB) || !bytes.Equal(got.Labels, want.Labels) {
				t.Fatalf("example %d differs between cached and decoded", id)
			}
		}
	}
}

func TestClassFractions(t *testing.T) {
	root := t.TempDir()
	img := coordImage(10, 10, 0)
	// a: left half class 0, right half class 1 except the last two
	// columns, which are ignored (label 9 mapped to 255).
	writePNG(t, filepath.Join(root, "img", "a.png"), img)
	writePNG(t, filepath.Join(root, "ann", "a.png"), grayMask(10, 10, func(x, y int) uint8 {
		switch {
		case x < 5:
			return 0
		case x < 8:
			return 1
		}
		return 9
	}))
	// b: everything ignored.
	writePNG(t, filepath.Join(root, "img", "b.png"), img)
	writePNG(t, filepath.Join(root, "ann", "b.png"), grayMask(10, 10, func(x, y int) uint8 { return 9 }))
	lm, err := imageio.ParseLabelMap("9:255")
	if err != nil {
		t.Fatal(err)
	}
	ds, _, err := Open(context.Background(), Config{
		ImageDir: filepath.Join(root, "img"), MaskDir: filepath.Join(root, "ann"),
		LabelMap: lm, NumClasses: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	fr := ds.ClassFractions()
	want := [][]float64{{50.0 / 80, 30.0 / 80, 0}, {0, 0, 0}}
	for id := range want {
		for c := range want[id] {
			if math.Abs(fr[id][c]-want[id][c]) > 1e-12 {
				t.Fatalf("fractions %v, want %v", fr, want)
			}
		}
	}
	if got := ds.Fraction(0, 1); math.Abs(got-30.0/80) > 1e-12 {
		t.Fatalf("Fraction(0, 1) = %v", got)
	}
	if got := ds.Fraction(0, 0, 1, 1, 7); math.Abs(got-1) > 1e-12 {
		t.Fatalf("Fraction(0, 0, 1, 1, 7) = %v, want 1 (duplicates and unknown classes ignored)", got)
	}
	if got := ds.ClassCounts(0); got[0] != 50 || got[1] != 30 || got[2] != 0 {
		t.Fatalf("counts %v", got)
	}
	if ds.Fraction(5, 0) != 0 || ds.ClassCounts(5) != nil {
		t.Fatal("unknown id has statistics")
	}
}

// The object size of docs/method.md §1, "the fraction of its pixels whose
// label is one of the size classes" (ignored pixels not counted), is the
// same whether read from an opened data set or from a mask's labels.
func TestObjectFractionMatchesDefinition(t *testing.T) {
	root := t.TempDir()
	label := func(x, y int) uint8 { // classes 0..3, 255 ignored
		if v := uint8((7*x + 3*y + x*y) % 5); v < 4 {
			return v
		}
		return 255
	}
	writePNG(t, filepath.Join(root, "img", "a.png"), coordImage(13, 9, 0))
	writePNG(t, filepath.Join(root, "ann", "a.png"), grayMask(13, 9, label))
	ds, _, err := Open(context.Background(), Config{
		ImageDir: filepath.Join(root, "img"), MaskDir: filepath.Join(root, "ann"), NumClasses: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ds.Load(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, classes := range [][]int{{1}, {1, 2, 3}, {3, 0}, {2, 2}, {}, {255}} {
		in, labelled := 0, 0
		for y := range 9 {
			for x := range 13 {
				l := label(x, y)
				if l == 255 {
					continue
				}
				labelled++
				for _, c := range classes {
					if int(l) == c {
						in++
						break
					}
				}
			}
		}
		want := float64(in) / float64(labelled)
		if got := ds.Fraction(0, classes...); math.Abs(got-want) > 1e-12 {
			t.Errorf("Dataset.Fraction(%v) = %v, want %v", classes, got, want)
		}
		if got := metrics.MaskObjectFraction(s.Labels, ds.Ignore(), classes); math.Abs(got-want) > 1e-12 {
			t.Errorf("MaskObjectFraction(%v) = %v, want %v", classes, got, want)
		}
	}
	// Nothing labelled, or nothing ignored.
	if got := metrics.MaskObjectFraction([]uint8{255, 255}, 255, []int{255}); got != 0 {
		t.Errorf("an all-ignored mask has object size %v", got)
	}
	if got := metrics.MaskObjectFraction([]uint8{1, 0, 255, 1}, -1, []int{1}); got != 0.5 {
		t.Errorf("with no ignore label, object size %v, want 0.5", got)
	}
}

func TestInferNumClasses(t *testing.T) {
	root := makeSet(t, 2, 60, 40) // labels 0..2 and 8..10
	ds := openSet(t, root, func(c *Config) { c.NumClasses = 0 })
	if ds.NumClasses() != 11 {
		t.Fatalf("inferred %d classes, want 11", ds.NumClasses())
	}
}

// badSet writes good examples a, b and one bad example per kind.
func badSet(t *testing.T) (root string, bad map[string]string) {
	root = makeSet(t, 2, 60, 40)
	imgs, masks := filepath.Join(root, "images", "train"), filepath.Join(root, "masks", "train")
	// Corrupt image.
	if err := os.WriteFile(filepath.Join(imgs, "c.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644); err != nil {
		t.Fatal(err)
	}
	writePNG(t, filepath.Join(masks, "c.png"), grayMask(60, 40, blockLabel))
	// Mask of the wrong size.
	writePNG(t, filepath.Join(imgs, "d.png"), coordImage(60, 40, 0))
	writePNG(t, filepath.Join(masks, "d.png"), grayMask(40, 60, blockLabel))
	// Label outside the classes.
	writePNG(t, filepath.Join(imgs, "e.png"), coordImage(60, 40, 0))
	writePNG(t, filepath.Join(masks, "e.png"), grayMask(60, 40, func(x, y int) uint8 { return 77 }))
	// Image without a mask.
	writePNG(t, filepath.Join(imgs, "f.png"), coordImage(60, 40, 0))
	return root, map[string]string{
		"corrupt image": filepath.Join(imgs, "c.png"),
		"wrong size":    filepath.Join(masks, "d.png"),
		"label range":   filepath.Join(masks, "e.png"),
		"no mask":       filepath.Join(imgs, "f.png"),
	}
}

func TestOpenErrorsNameTheFile(t *testing.T) {
	root, bad := badSet(t)
	imgs, masks := filepath.Join(root, "images", "train"), filepath.Join(root, "masks", "train")
	// Each bad kind alone: hide the others by moving them away.
	for kind, path := range bad {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			for _, sub := range []string{"i", "m"} {
				if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			link := func(src, dst string) {
				data, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dst, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			stem := strings.TrimSuffix(filepath.Base(path), ".png")
			for _, s := range []string{"a", "b", stem} {
				link(filepath.Join(imgs, s+".png"), filepath.Join(dir, "i", s+".png"))
				if _, err := os.Stat(filepath.Join(masks, s+".png")); err == nil {
					link(filepath.Join(masks, s+".png"), filepath.Join(dir, "m", s+".png"))
				}
			}
			want := filepath.Join(dir, map[bool]string{true: "i", false: "m"}[strings.HasPrefix(path, imgs)], stem+".png")
			_, _, err := Open(context.Background(), Config{ImageDir: filepath.Join(dir, "i"), MaskDir: filepath.Join(dir, "m"), NumClasses: blockClasses})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v does not name %s", err, want)
			}
		})
	}
}

func TestSkipBad(t *testing.T) {
	root, bad := badSet(t)
	ds, problems, err := Open(context.Background(), Config{
		ImageDir: filepath.Join(root, "images", "train"), MaskDir: filepath.Join(root, "masks", "train"),
		NumClasses: blockClasses, SkipBad: true, Workers: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Len() != 2 {
		t.Fatalf("kept %d examples, want 2", ds.Len())
	}
	if len(problems) != len(bad) {
		t.Fatalf("%d problems, want %d: %v", len(problems), len(bad), problems)
	}
	for kind, path := range bad {
		found := false
		for _, p := range problems {
			if p.Path == path && strings.Contains(p.Error(), path) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no problem names %s in %v", kind, path, problems)
		}
	}
	if e, _ := ds.Example(1); filepath.Base(e.Image) != "b.png" {
		t.Fatalf("example 1 is %s, want b.png", e.Image)
	}
}

func TestOpenConfigErrors(t *testing.T) {
	root := makeSet(t, 1, 20, 20)
	base := Config{ImageDir: filepath.Join(root, "images", "train"), MaskDir: filepath.Join(root, "masks", "train")}
	for name, mod := range map[string]func(*Config){
		"no folders":       func(c *Config) { c.ImageDir = "" },
		"ignore too large": func(c *Config) { c.Ignore = 300 },
		"classes past ignore": func(c *Config) {
			c.NumClasses, c.Ignore = 20, 10
		},
		"names mismatch": func(c *Config) { c.NumClasses, c.ClassNames = 3, []string{"a"} },
		"missing folder": func(c *Config) { c.MaskDir = filepath.Join(root, "nope") },
		"empty":          func(c *Config) { c.ImageDir = t.TempDir() },
	} {
		cfg := base
		mod(&cfg)
		if _, _, err := Open(context.Background(), cfg); err == nil {
			t.Errorf("%s: Open succeeded", name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Open(ctx, base); err == nil {
		t.Error("Open with a cancelled context succeeded")
	}
}
