package data

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/imageio"
)

// personNorm is the DeepLabV3+ person model's normalisation, x/127.5 − 1.
var personNorm = imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1}

func trainConfig(seed uint64, workers int) LoaderConfig {
	return LoaderConfig{
		BatchSize:  2,
		Preprocess: personNorm,
		Augment:    &Augment{Height: 96, Width: 128, ScaleMin: 0.5, ScaleMax: 2, Flip: true},
		Seed:       seed,
		Epochs:     3,
		Workers:    workers,
	}
}

func sameBatches(a, b []*Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Epoch != y.Epoch || x.Step != y.Step || x.Height != y.Height || x.Width != y.Width ||
			!slices.Equal(x.IDs, y.IDs) || !slices.Equal(x.Masks, y.Masks) || !slices.Equal(x.Images, y.Images) {
			return false
		}
	}
	return true
}

func TestLoaderDeterministic(t *testing.T) {
	ds := openSet(t, makeSet(t, 5, 200, 150), nil)
	a := collect(t, ds, trainConfig(7, 1))
	b := collect(t, ds, trainConfig(7, 4))
	if len(a) != 3*2 { // 5 examples, batches of 2, last dropped, 3 epochs
		t.Fatalf("%d batches, want 6", len(a))
	}
	if !sameBatches(a, b) {
		t.Fatal("same seed, different worker counts: batches differ")
	}
	// Recycled buffers are refilled with the same bytes.
	l, err := NewLoader(context.Background(), ds, trainConfig(7, 2))
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		b, err := l.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !sameBatches(a[i:i+1], []*Batch{b}) {
			t.Fatalf("batch %d differs with recycling", i)
		}
		l.Recycle(b)
	}
	l.Close()
	c := collect(t, ds, trainConfig(8, 4))
	if sameBatches(a, c) {
		t.Fatal("different seeds gave identical batches")
	}
	// Epochs differ from each other too.
	if slices.Equal(a[0].Images, a[2].Images) {
		t.Fatal("epochs 0 and 1 start with identical batches")
	}
	for _, bt := range a {
		if len(bt.Images) != 2*3*96*128 || len(bt.Masks) != 2*96*128 || bt.Geometries != nil {
			t.Fatalf("batch shapes: %d images, %d masks", len(bt.Images), len(bt.Masks))
		}
	}
}

func TestLoaderResume(t *testing.T) {
	ds := openSet(t, makeSet(t, 5, 200, 150), nil)
	cfg := trainConfig(3, 3)
	full := collect(t, ds, cfg)
	// Run until (1, 1), then resume from the saved position.
	l, err := NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Next(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	epoch, step := l.Position()
	l.Close()
	if epoch != 1 || step != 1 {
		t.Fatalf("position after 3 batches (%d, %d), want (1, 1)", epoch, step)
	}
	cfg.StartEpoch, cfg.StartStep = epoch, step
	rest := collect(t, ds, cfg)
	if !sameBatches(full[3:], rest) {
		t.Fatal("resumed run differs from the uninterrupted one")
	}
	// A step at the end of an epoch resumes at the next one.
	cfg.StartEpoch, cfg.StartStep = 1, 2
	if rest := collect(t, ds, cfg); !sameBatches(full[4:], rest) {
		t.Fatal("resuming at the end of an epoch differs")
	}
	cfg.StartEpoch, cfg.StartStep = 1, 3
	l, err = NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "past") {
		t.Fatalf("start past the epoch: %v", err)
	}
}

// TestAugmentGeometry checks that image and mask move together: every
// image pixel encodes its source coordinates, and the mask label at the
// same output pixel must be the label of that source pixel.
func TestAugmentGeometry(t *testing.T) {
	ds := openSet(t, makeSet(t, 4, 200, 150), nil)
	pad := [3]uint8{0, 0, 7} // blue 7 marks padding; images have blue ≥ 100
	for _, sc := range []struct{ lo, hi float64 }{{1, 1}, {0.3, 2}} {
		cfg := LoaderConfig{
			BatchSize:  4,
			Preprocess: imageio.Preprocess{}, // tensor values are the bytes
			Augment:    &Augment{Height: 120, Width: 160, ScaleMin: sc.lo, ScaleMax: sc.hi, Flip: true, PadColor: &pad},
			Epochs:     6,
		}
		flipped, padded := 0, 0
		for _, b := range collect(t, ds, cfg) {
			hw := b.Height * b.Width
			for k, id := range b.IDs {
				img, mask := b.Images[k*3*hw:(k+1)*3*hw], b.Masks[k*hw:(k+1)*hw]
				bad := 0
				for i := range hw {
					r, g, bl := img[i], img[hw+i], img[2*hw+i]
					if bl == 7 {
						padded++
						if mask[i] != 255 {
							t.Fatalf("padding pixel %d has label %d", i, mask[i])
						}
						continue
					}
					if mask[i] == 255 || bl != float32(100+id) {
						t.Fatalf("id %d pixel %d: label %d, blue %v", id, i, mask[i], bl)
					}
					x, y := int(math.Round(float64(r))), int(math.Round(float64(g)))
					if sc.lo == 1 && (float64(r) != float64(x) || float64(g) != float64(y)) {
						t.Fatalf("scale 1 blended pixels: %v, %v", r, g)
					}
					// Nearest and bilinear may disagree by a pixel at block edges.
					want := int64(blockLabel(x, y))
					if mask[i] != want {
						near := false
						for _, d := range [][2]int{{-1, 0}, {1, 0}, {0, -1}, {0, 1}} {
							if int64(blockLabel(min(max(x+d[0], 0), 199), min(max(y+d[1], 0), 149))) == mask[i] {
								near = true
							}
						}
						if !near || sc.lo == 1 {
							t.Fatalf("scale %v: pixel %d shows source (%d,%d), label %d, want %d", sc, i, x, y, mask[i], want)
						}
						bad++
					}
				}
				if bad > hw/50 {
					t.Fatalf("%d of %d labels off by a pixel", bad, hw)
				}
				// Flipped crops run right to left.
				if hw > 1 && img[0] > img[1] && img[2*hw] != 7 && img[2*hw+1] != 7 {
					flipped++
				}
			}
		}
		if flipped == 0 {
			t.Errorf("scale %v: no flipped crop seen", sc)
		}
		if sc.lo < 1 && padded == 0 {
			t.Errorf("scale %v: no padding seen", sc)
		}
	}
}

func TestIgnorePadding(t *testing.T) {
	ds := openSet(t, makeSet(t, 2, 64, 48), nil)
	cfg := LoaderConfig{
		BatchSize:  2,
		Preprocess: personNorm,
		Augment:    &Augment{Height: 96, Width: 128},
		Epochs:     1,
	}
	b := collect(t, ds, cfg)[0]
	hw := 96 * 128
	for k := range 2 {
		ignored := 0
		for i, l := range b.Masks[k*hw : (k+1)*hw] {
			if l != 255 {
				continue
			}
			ignored++
			for c := range 3 {
				// Default pad colour 128 normalises to 128/127.5 − 1 ≈ 0.004.
				if v := b.Images[k*3*hw+c*hw+i]; math.Abs(float64(v)) > 0.01 {
					t.Fatalf("padding value %v, want ≈ 0", v)
				}
			}
		}
		if ignored != hw-64*48 {
			t.Fatalf("%d ignored pixels, want %d", ignored, hw-64*48)
		}
	}
}

func TestZeroColor(t *testing.T) {
	p := imageio.Preprocess{Mean: []float64{0.406, 0.456, 0.485}, Std: []float64{0.225, 0.224, 0.229}, ChannelOrder: imageio.BGR}
	if got := zeroColor(&p); got != [3]uint8{124, 116, 104} {
		t.Fatalf("BGR ImageNet mean: %v", got)
	}
	if got := zeroColor(&personNorm); got != [3]uint8{128, 128, 128} {
		t.Fatalf("person model: %v", got)
	}
}

func TestEvalMode(t *testing.T) {
	ds := openSet(t, makeSet(t, 5, 200, 150), nil)
	batches := collect(t, ds, LoaderConfig{BatchSize: 2, Preprocess: imageio.Preprocess{}, Epochs: 1})
	if len(batches) != 3 || batches[2].Size() != 1 {
		t.Fatalf("eval keeps the last batch: got %d batches", len(batches))
	}
	var ids []int
	for _, b := range batches {
		ids = append(ids, b.IDs...)
		if b.Height != 150 || b.Width != 200 || len(b.Geometries) != b.Size() || !b.Geometries[0].Identity() {
			t.Fatalf("native eval batch %dx%d geometries %v", b.Height, b.Width, b.Geometries)
		}
		hw := 150 * 200
		// Native size: pixel (x, y) is exactly the source.
		for _, i := range []int{0, 37*200 + 111, hw - 1} {
			if b.Images[i] != float32(i%200) || b.Images[hw+i] != float32(i/200) || b.Masks[i] != int64(blockLabel(i%200, i/200)) {
				t.Fatalf("pixel %d changed in evaluation", i)
			}
		}
	}
	if !slices.Equal(ids, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("eval order %v", ids)
	}
	// Letterbox: borders are ignored in the mask.
	lb := collect(t, ds, LoaderConfig{
		BatchSize: 5, Epochs: 1,
		Preprocess: imageio.Preprocess{Height: 200, Width: 200, Resize: imageio.ResizeLetterbox},
	})[0]
	g := lb.Geometries[0]
	if g.Content.Dy() != 150 || lb.Masks[0] != 255 || lb.Masks[(g.Content.Min.Y)*200] == 255 {
		t.Fatalf("letterbox geometry %v, mask corners %d %d", g, lb.Masks[0], lb.Masks[g.Content.Min.Y*200])
	}
}

func TestOrderHook(t *testing.T) {
	ds := openSet(t, makeSet(t, 4, 60, 40), nil)
	cfg := trainConfig(1, 2)
	cfg.Augment = &Augment{Height: 40, Width: 60}
	cfg.Epochs = 2
	cfg.Order = func(epoch int) []int { return []int{3, 3, 1, epoch} }
	var ids []int
	for _, b := range collect(t, ds, cfg) {
		ids = append(ids, b.IDs...)
	}
	if !slices.Equal(ids, []int{3, 3, 1, 0, 3, 3, 1, 1}) {
		t.Fatalf("ids %v", ids)
	}
	cfg.Order = func(int) []int { return []int{0, 9} }
	l, err := NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "id 9") {
		t.Fatalf("out-of-range id: %v", err)
	}
	if _, err2 := l.Next(context.Background()); err2 == nil {
		t.Fatal("loader continued after an error")
	}
}

func TestLoaderConfigErrors(t *testing.T) {
	ds := openSet(t, makeSet(t, 2, 60, 40), nil)
	for name, cfg := range map[string]LoaderConfig{
		"batch size":  {BatchSize: 0},
		"no crop":     {BatchSize: 1, Augment: &Augment{}},
		"scale range": {BatchSize: 1, Augment: &Augment{Height: 8, Width: 8, ScaleMin: 2, ScaleMax: 1}},
		"preprocess":  {BatchSize: 1, Preprocess: imageio.Preprocess{ChannelOrder: "GRB"}},
		"no batch":    {BatchSize: 3, Augment: &Augment{Height: 8, Width: 8}},
		"negative":    {BatchSize: 1, StartStep: -1},
	} {
		if l, err := NewLoader(context.Background(), ds, cfg); err == nil {
			l.Close()
			t.Errorf("%s: NewLoader succeeded", name)
		}
	}
	// Native-size evaluation cannot stack images of different sizes.
	root := makeSet(t, 1, 60, 40)
	writePNG(t, filepath.Join(root, "images", "train", "z.png"), coordImage(30, 20, 0))
	writePNG(t, filepath.Join(root, "masks", "train", "z.png"), grayMask(30, 20, blockLabel))
	mixed := openSet(t, root, nil)
	l, err := NewLoader(context.Background(), mixed, LoaderConfig{BatchSize: 2, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Next(context.Background()); err == nil || !strings.Contains(err.Error(), "z.png") {
		t.Fatalf("mixed sizes: %v", err)
	}
}

func TestDecodeErrorDuringLoading(t *testing.T) {
	root := makeSet(t, 2, 60, 40)
	ds := openSet(t, root, func(c *Config) { c.CacheBytes = -1 })
	gone := filepath.Join(root, "images", "train", "b.png")
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	l, err := NewLoader(context.Background(), ds, LoaderConfig{BatchSize: 2, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Next(context.Background()); err == nil || !strings.Contains(err.Error(), gone) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestLoaderStopsCleanly(t *testing.T) {
	ds := openSet(t, makeSet(t, 6, 200, 150), nil)
	before := runtime.NumGoroutine()

	// Close with batches still being prepared.
	cfg := trainConfig(1, 4)
	cfg.Epochs = 0
	l, err := NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l.Close()
	if _, err := l.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	checkNoLeak(t, before)

	// Cancelling the loader's context ends it too.
	ctx, cancel := context.WithCancel(context.Background())
	l, err = NewLoader(ctx, ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := l.Next(context.Background()); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("Next after cancel: %v", err)
	}
	l.Close()
	checkNoLeak(t, before)

	// Next's own context bounds only the wait.
	l, err = NewLoader(context.Background(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(context.Background(), time.Nanosecond)
	<-short.Done()
	want := 0 // the timed-out call may still have got batch 0 if it was ready
	if b, err := l.Next(short); err == nil {
		want = b.Step + 1
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	stop()
	b, err := l.Next(context.Background())
	if err != nil || b.Epoch != 0 || b.Step != want {
		t.Fatalf("after a timed-out wait: batch %+v, %v; want step %d", b, err, want)
	}
	l.Close()
	checkNoLeak(t, before)
}

// A loader split into parts (one per rank of a data-parallel run) loads,
// part by part, exactly the slots of the unsplit batch: the same examples
// with the same augmentation, in the same order, resumable alike.
func TestLoaderParts(t *testing.T) {
	ds := openSet(t, makeSet(t, 9, 200, 150), nil)
	cfg := trainConfig(11, 2)
	cfg.BatchSize = 4
	whole := collect(t, ds, cfg)
	if len(whole) != 3*2 {
		t.Fatalf("%d batches, want 6", len(whole))
	}
	const parts = 2
	split := make([][]*Batch, parts)
	for p := range parts {
		pc := cfg
		pc.Parts, pc.Part = parts, p
		split[p] = collect(t, ds, pc)
	}
	img, hw := 3*96*128, 96*128
	for i, w := range whole {
		for p := range parts {
			b := split[p][i]
			lo, hi := p*2, p*2+2
			if b.Epoch != w.Epoch || b.Step != w.Step || !slices.Equal(b.IDs, w.IDs[lo:hi]) || !slices.Equal(b.Global, w.IDs) ||
				!slices.Equal(b.GlobalIDs(), w.GlobalIDs()) {
				t.Fatalf("batch %d part %d: ids %v of %v, want %v of %v", i, p, b.IDs, b.Global, w.IDs[lo:hi], w.IDs)
			}
			if !slices.Equal(b.Images, w.Images[lo*img:hi*img]) || !slices.Equal(b.Masks, w.Masks[lo*hw:hi*hw]) {
				t.Fatalf("batch %d part %d: pixels differ from the unsplit batch's slots %d..%d", i, p, lo, hi-1)
			}
		}
	}
	if whole[0].Global != nil {
		t.Error("an unsplit batch has Global set")
	}
	pc := cfg
	pc.Parts, pc.Part, pc.StartEpoch, pc.StartStep = parts, 1, 1, 1
	if rest := collect(t, ds, pc); len(rest) != 3 || !slices.Equal(rest[0].Images, whole[3].Images[2*img:]) {
		t.Fatal("a resumed part differs from the uninterrupted one")
	}
	for _, bad := range []struct{ parts, part, batch int }{{3, 0, 4}, {2, 2, 4}, {2, -1, 4}} {
		pc := cfg
		pc.Parts, pc.Part, pc.BatchSize = bad.parts, bad.part, bad.batch
		if l, err := NewLoader(context.Background(), ds, pc); err == nil {
			l.Close()
			t.Errorf("part %d of %d of batches of %d accepted", bad.part, bad.parts, bad.batch)
		}
	}
}

// WholeFrame shows every pixel of the image, rescaled to fit the training
// size with its aspect kept and centred: each output holds the whole label
// histogram of its mask (the size label's fraction survives), whatever the
// scale range says, and the padding is ignored.
func TestWholeFrame(t *testing.T) {
	ds := openSet(t, makeSet(t, 3, 200, 150), nil)
	pad := [3]uint8{0, 0, 7}
	cfg := LoaderConfig{
		BatchSize:  3,
		Preprocess: imageio.Preprocess{},
		Augment:    &Augment{Height: 120, Width: 120, ScaleMin: 0.3, ScaleMax: 2, Flip: true, PadColor: &pad, WholeFrame: true},
		Epochs:     4,
	}
	src := make([]float64, blockClasses)
	for y := range 150 {
		for x := range 200 {
			src[blockLabel(x, y)] += 1.0 / (200 * 150)
		}
	}
	flipped := 0
	for _, b := range collect(t, ds, cfg) {
		hw := b.Height * b.Width
		for k := range b.IDs {
			img, mask := b.Images[k*3*hw:(k+1)*3*hw], b.Masks[k*hw:(k+1)*hw]
			got := make([]float64, blockClasses)
			padded, minX, maxX, minY, maxY := 0, 1e9, -1e9, 1e9, -1e9
			for i := range hw {
				if img[2*hw+i] == 7 {
					padded++
					if mask[i] != 255 || (i/120 >= 15 && i/120 < 105) {
						t.Fatalf("padding at row %d (label %d); want only rows outside 15..104, ignored", i/120, mask[i])
					}
					continue
				}
				got[mask[i]]++
				x, y := float64(img[i]), float64(img[hw+i])
				minX, maxX, minY, maxY = min(minX, x), max(maxX, x), min(minY, y), max(maxY, y)
			}
			if padded != 120*30 {
				t.Fatalf("%d padded pixels, want %d (120×90 image centred in 120×120)", padded, 120*30)
			}
			if minX > 2 || maxX < 197 || minY > 2 || maxY < 147 {
				t.Fatalf("the output shows source x %v..%v, y %v..%v: not the whole 200×150 frame", minX, maxX, minY, maxY)
			}
			for c, f := range src {
				if g := got[c] / (120 * 90); math.Abs(g-f) > 0.01 {
					t.Fatalf("class %d covers %.4f of the output, %.4f of the source", c, g, f)
				}
			}
			if img[0+15*120] > img[1+15*120] {
				flipped++
			}
		}
	}
	if flipped == 0 {
		t.Error("no flipped frame")
	}
}
