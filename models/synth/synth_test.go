package synth_test

import (
	"bytes"
	"image"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/models/synth"
)

// readTree returns every file under dir by relative path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func small(seed uint64) synth.Config {
	c := synth.DefaultConfig()
	c.Seed, c.Train, c.Val = seed, 24, 8
	return c
}

func TestSameSeedSameBytes(t *testing.T) {
	a, b, other := t.TempDir(), t.TempDir(), t.TempDir()
	if _, err := synth.Generate(a, small(7)); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Generate(b, small(7)); err != nil {
		t.Fatal(err)
	}
	fa, fb := readTree(t, a), readTree(t, b)
	if len(fa) != 2*(24+8)+2 {
		t.Fatalf("%d files, want %d images and masks, classes.txt and synth.json", len(fa), 2*(24+8))
	}
	for name, data := range fa {
		if !bytes.Equal(data, fb[name]) {
			t.Errorf("%s differs between two runs with the same seed", name)
		}
	}
	// Image i does not depend on how many images the split has.
	fewer := small(7)
	fewer.Train = 10
	one, err := synth.Render(fewer, "train", 9)
	if err != nil {
		t.Fatal(err)
	}
	img, err := imageio.ReadImage(filepath.Join(a, "images", "train", "train_00009.png"))
	if err != nil {
		t.Fatal(err)
	}
	if !samePixels(one.Image, img) {
		t.Error("train_00009 changes with the size of the training split")
	}
	// Another seed gives other images.
	if _, err := synth.Generate(other, small(8)); err != nil {
		t.Fatal(err)
	}
	fo := readTree(t, other)
	same := 0
	for name, data := range fa {
		if strings.HasPrefix(name, "images") && bytes.Equal(data, fo[name]) {
			same++
		}
	}
	if same > 0 {
		t.Errorf("%d images are the same with seeds 7 and 8", same)
	}
}

func samePixels(a *image.RGBA, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	for y := 0; y < a.Bounds().Dy(); y++ {
		for x := 0; x < a.Bounds().Dx(); x++ {
			r1, g1, b1, _ := a.At(x, y).RGBA()
			r2, g2, b2, _ := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 {
				return false
			}
		}
	}
	return true
}

// The default set's (300 + 100 images) objects' visible areas span more
// than two orders of magnitude, log-uniformly. (Its speed is
// BenchmarkGenerateDefault's business, not a unit test's.)
func TestDefaultSetSizes(t *testing.T) {
	dir := t.TempDir()
	c := synth.DefaultConfig()
	m, err := synth.Generate(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Images) != 400 {
		t.Fatalf("%d images in the manifest", len(m.Images))
	}
	fr := m.Fractions()
	sort.Float64s(fr)
	lo, hi := fr[0], fr[len(fr)-1]
	p5, p95 := fr[len(fr)/20], fr[len(fr)*19/20]
	t.Logf("generated %d images (%d visible objects); visible fraction %.2g..%.2g, 5th–95th percentile %.2g..%.2g",
		len(m.Images), len(fr), lo, hi, p5, p95)
	if lo > 1e-3 || hi < 0.1 || p95/p5 < 100 {
		t.Errorf("object fractions %.3g..%.3g (5th–95th percentile %.3g..%.3g); want two orders of magnitude", lo, hi, p5, p95)
	}
	// Log-uniform: about half the drawn fractions lie below the geometric
	// mean of the bounds.
	mid := math.Sqrt(c.MinFraction * c.MaxFraction)
	var below, all int
	classes := map[int]int{}
	for _, im := range m.Images {
		for _, o := range im.Objects {
			all++
			classes[o.Class]++
			if o.Fraction < mid {
				below++
			}
			if o.Fraction < c.MinFraction || o.Fraction > c.MaxFraction {
				t.Fatalf("%s: drawn fraction %v outside %v..%v", im.Name, o.Fraction, c.MinFraction, c.MaxFraction)
			}
		}
	}
	if f := float64(below) / float64(all); f < 0.4 || f > 0.6 {
		t.Errorf("%.2f of the fractions lie below the geometric mean %.3g; want about half", f, mid)
	}
	if classes[synth.Disc] < all/3 || classes[synth.Square] < all/3 {
		t.Errorf("class counts %v", classes)
	}
	// The layout is the one finetune reads.
	for _, split := range synth.Splits {
		set, err := datalayout.Open(dir, datalayout.Options{Split: split})
		if err != nil || set.Format != "folders" || set.Err() != nil || len(set.Samples) == 0 {
			t.Fatalf("%s: %v, %v", split, set, err)
		}
	}
	names, err := os.ReadFile(filepath.Join(dir, synth.ClassesFile))
	if err != nil || string(names) != "background\ndisc\nsquare\n" {
		t.Errorf("classes.txt %q (%v)", names, err)
	}
}

// Masks label exactly the objects' visible pixels, and they line up with
// the images: colour changes across mask boundaries far more than inside
// regions.
func TestMasksMatchImages(t *testing.T) {
	dir := t.TempDir()
	c := small(3)
	m, err := synth.Generate(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	var across, within float64
	var nAcross, nWithin int
	for _, im := range m.Images {
		mask, err := imageio.ReadMask(filepath.Join(dir, "masks", im.Split, im.Name+".png"), imageio.MaskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		img, err := imageio.ReadImage(filepath.Join(dir, "images", im.Split, im.Name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		if mask.Width != c.Width || mask.Height != c.Height || img.Bounds().Dx() != c.Width || img.Bounds().Dy() != c.Height {
			t.Fatalf("%s: image %v, mask %dx%d, want %dx%d", im.Name, img.Bounds(), mask.Width, mask.Height, c.Width, c.Height)
		}
		counts := make([]int, synth.NumClasses)
		for _, l := range mask.Labels {
			if l < 0 || int(l) >= synth.NumClasses {
				t.Fatalf("%s: label %d", im.Name, l)
			}
			counts[l]++
		}
		want := make([]int, synth.NumClasses)
		for _, o := range im.Objects {
			want[o.Class] += o.Pixels
		}
		want[synth.Background] = c.Width*c.Height - want[synth.Disc] - want[synth.Square]
		if !slices.Equal(counts, want) {
			t.Errorf("%s: mask class counts %v, objects' visible pixels %v", im.Name, counts, want)
		}
		rgba := func(x, y int) [3]float64 {
			r, g, b, _ := img.At(x, y).RGBA()
			return [3]float64{float64(r >> 8), float64(g >> 8), float64(b >> 8)}
		}
		for y := 0; y < c.Height; y++ {
			for x := 0; x+1 < c.Width; x++ {
				p, q := rgba(x, y), rgba(x+1, y)
				d := math.Abs(p[0]-q[0]) + math.Abs(p[1]-q[1]) + math.Abs(p[2]-q[2])
				if mask.Labels[y*c.Width+x] != mask.Labels[y*c.Width+x+1] {
					across += d
					nAcross++
				} else {
					within += d
					nWithin++
				}
			}
		}
	}
	ratio := (across / float64(nAcross)) / (within / float64(nWithin))
	t.Logf("mean colour step across mask boundaries %.1f, inside regions %.1f (ratio %.1f)", across/float64(nAcross), within/float64(nWithin), ratio)
	if nAcross == 0 || ratio < 2 {
		t.Errorf("colour step across boundaries / inside regions = %.2f; the masks do not follow the images", ratio)
	}
	// Render gives what Generate wrote.
	ex, err := synth.Render(c, "val", 2)
	if err != nil {
		t.Fatal(err)
	}
	mask, err := imageio.ReadMask(filepath.Join(dir, "masks", "val", "val_00002.png"), imageio.MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := mask.Uint8(nil)
	if err != nil || !bytes.Equal(got, ex.Labels) {
		t.Errorf("Render's labels differ from the written mask (%v)", err)
	}
}

// Generate reuses a complete set made with the same configuration and
// refuses to write over anything else.
func TestGenerateReusesOrRefuses(t *testing.T) {
	dir := t.TempDir()
	c := small(1)
	c.Train, c.Val = 4, 2
	first, err := synth.Generate(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "images", "train", "train_00000.png")
	before, _ := os.Stat(img)
	again, err := synth.Generate(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(img)
	if !before.ModTime().Equal(after.ModTime()) || len(again.Images) != len(first.Images) {
		t.Error("a second Generate with the same config rewrote the set")
	}
	c2 := c
	c2.Seed++
	if _, err := synth.Generate(dir, c2); err == nil || !strings.Contains(err.Error(), "generated with") {
		t.Errorf("another config over an existing set: %v", err)
	}
	foreign := t.TempDir()
	os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644)
	if _, err := synth.Generate(foreign, c); err == nil || !strings.Contains(err.Error(), "neither empty") {
		t.Errorf("a folder with other files: %v", err)
	}
	os.Remove(img)
	if _, err := synth.Generate(dir, c); err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Errorf("a set with a missing image: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		edit func(*synth.Config)
		want string
	}{
		{func(c *synth.Config) { c.Train, c.Val = 0, 0 }, "no images"},
		{func(c *synth.Config) { c.Train = -1 }, "train"},
		{func(c *synth.Config) { c.Height = 4 }, "size"},
		{func(c *synth.Config) { c.MinFraction, c.MaxFraction = 0.5, 0.1 }, "fractions"},
		{func(c *synth.Config) { c.MaxFraction = 2 }, "fractions"},
		{func(c *synth.Config) { c.MaxObjects = 100 }, "max objects"},
		{func(c *synth.Config) { c.Camouflage = 1.5 }, "camouflage"},
		{func(c *synth.Config) { c.Noise = math.NaN() }, "noise"},
	} {
		c := synth.DefaultConfig()
		tc.edit(&c)
		if _, err := synth.Generate(t.TempDir(), c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one mentioning %q", c, err, tc.want)
		}
	}
	if _, err := synth.Render(synth.DefaultConfig(), "test", 0); err == nil {
		t.Error("Render accepted an unknown split")
	}
	// Turning the extras off gives clean images: no distractors, no noise,
	// no camouflage.
	c := synth.DefaultConfig()
	c.Distractors, c.Noise, c.Camouflage = -1, -1, -1
	n, err := c.Normalized()
	if err != nil || n.Distractors != -1 || n.Noise != -1 || n.Camouflage != -1 {
		t.Fatalf("normalized %+v, %v", n, err)
	}
	for i := 0; i < 20; i++ {
		ex, err := synth.Render(c, "train", i)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range ex.Objects {
			if o.Camouflaged {
				t.Fatal("camouflage off, yet a camouflaged object")
			}
		}
	}
}

// BenchmarkGenerateDefault times the default set (300 + 100 images),
// which the demo generates; it used to be a wall-clock assertion.
func BenchmarkGenerateDefault(b *testing.B) {
	c := synth.DefaultConfig()
	for range b.N {
		if _, err := synth.Generate(b.TempDir(), c); err != nil {
			b.Fatal(err)
		}
	}
}
