package imageio

import (
	"image"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	// [3 classes, 1×4]: class planes one after another.
	logits := []float32{
		1, 5, 2, nan,
		3, 5, 1, 0,
		2, 4, 7, -1,
	}
	dst := make([]uint8, 4)
	if err := Argmax(logits, 3, 1, 4, dst); err != nil {
		t.Fatal(err)
	}
	if want := []uint8{1, 0, 2, 1}; !slices.Equal(dst, want) {
		t.Fatalf("argmax %v, want %v (ties to the lower class, NaN never wins)", dst, want)
	}
	if err := Argmax(logits, 3, 2, 4, dst); err == nil {
		t.Error("wrong shape accepted")
	}
	if err := Argmax(make([]float32, 300), 300, 1, 1, dst); err == nil || !strings.Contains(err.Error(), "300 classes") {
		t.Errorf("300 classes: %v", err)
	}
	if err := Argmax(logits, 3, 1, 4, dst[:2]); err == nil {
		t.Error("short buffer accepted")
	}
}

func TestResizeLabels(t *testing.T) {
	src := []uint8{
		1, 2,
		3, 4,
	}
	dst := make([]uint8, 16)
	if err := ResizeLabels(src, 2, 2, dst, 4, 4); err != nil {
		t.Fatal(err)
	}
	want := []uint8{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}
	if !slices.Equal(dst, want) {
		t.Fatalf("got %v", dst)
	}
	back := make([]uint8, 4)
	if err := ResizeLabels(dst, 4, 4, back, 2, 2); err != nil || !slices.Equal(back, src) {
		t.Fatalf("down again: %v %v", back, err)
	}
	if err := ResizeLabels(src, 3, 2, dst, 4, 4); err == nil {
		t.Error("wrong source size accepted")
	}
	wide := []int32{70000, 1}
	out := make([]int32, 4)
	if err := ResizeLabels(wide, 2, 1, out, 4, 1); err != nil || out[1] != 70000 || out[2] != 1 {
		t.Fatalf("int32 labels: %v %v", out, err)
	}
}

// TestProjectRestoreRoundTrip: a mask projected into a letterboxed tensor
// and restored comes back unchanged when the tensor is larger.
func TestProjectRestoreRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const w, h = 48, 36
	labels := make([]uint8, w*h)
	for i := range labels {
		labels[i] = uint8(r.IntN(12))
	}
	for _, p := range []Preprocess{
		{Resize: ResizeLetterbox, Height: 100, Width: 100},
		{Height: 72, Width: 96},
		{},
	} {
		g, err := p.Geometry(w, h)
		if err != nil {
			t.Fatal(err)
		}
		proj := make([]uint8, g.Width*g.Height)
		if err := ProjectLabels(g, labels, proj, 255); err != nil {
			t.Fatal(err)
		}
		for y := 0; y < g.Height; y++ {
			for x := 0; x < g.Width; x++ {
				if in := image.Pt(x, y).In(g.Content); !in && proj[y*g.Width+x] != 255 {
					t.Fatalf("%+v: border pixel (%d,%d) = %d, want pad 255", p, x, y, proj[y*g.Width+x])
				}
			}
		}
		back := make([]uint8, w*h)
		if err := RestoreLabels(g, proj, back); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back, labels) {
			t.Fatalf("%+v: round trip changed labels", p)
		}
	}
}

func TestRestoreLogits(t *testing.T) {
	// Letterboxed 2-class logits for a 4×2 image in an 8×8 tensor: content
	// rows 2..5. Left half class 0, right half class 1.
	p := Preprocess{Resize: ResizeLetterbox, Height: 8, Width: 8}
	g, err := p.Geometry(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	if g.Content != image.Rect(0, 2, 8, 6) {
		t.Fatalf("content %v", g.Content)
	}
	logits := make([]float32, 2*64)
	for y := 0; y < 8; y++ {
		for x := 0; x < 8; x++ {
			v := float32(x) - 3.5 // class 1 score rises to the right
			if y < 2 || y >= 6 {
				v = 100 // border says class 1 everywhere; must be ignored
			}
			logits[64+y*8+x] = v
		}
	}
	dst := make([]uint8, 8)
	if err := g.RestoreLogits(logits, 2, dst); err != nil {
		t.Fatal(err)
	}
	if want := []uint8{0, 0, 1, 1, 0, 0, 1, 1}; !slices.Equal(dst, want) {
		t.Fatalf("restored %v, want %v", dst, want)
	}
	scores := make([]float32, 2*8)
	if err := g.RestoreScores(logits, 2, scores); err != nil {
		t.Fatal(err)
	}
	// Image pixel x=1 centre maps to tensor x 2.5: score -1.
	if got := scores[8+1]; math.Abs(float64(got)-(-1)) > 1e-6 {
		t.Fatalf("score at x=1: %v, want -1", got)
	}
	if err := g.RestoreLogits(logits[:10], 2, dst); err == nil {
		t.Error("short logits accepted")
	}
	bad := g
	bad.Content = image.Rect(0, 0, 9, 9)
	if err := bad.RestoreLogits(logits, 2, dst); err == nil || !strings.Contains(err.Error(), "invalid geometry") {
		t.Errorf("content outside tensor: %v", err)
	}
	if err := RestoreLabels(bad, make([]uint8, 64), dst); err == nil {
		t.Error("RestoreLabels accepted a bad geometry")
	}
}

// TestRestoreLogitsMatchesArgmaxAtSameSize: with no resize, restoring is
// plain argmax.
func TestRestoreLogitsMatchesArgmaxAtSameSize(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const c, w, h = 4, 9, 7
	logits := make([]float32, c*w*h)
	for i := range logits {
		logits[i] = r.Float32()
	}
	g, _ := (&Preprocess{}).Geometry(w, h)
	a, b := make([]uint8, w*h), make([]uint8, w*h)
	if err := Argmax(logits, c, h, w, a); err != nil {
		t.Fatal(err)
	}
	if err := g.RestoreLogits(logits, c, b); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Fatalf("argmax %v\nrestore %v", a, b)
	}
}

func BenchmarkRestoreLogits513To480x360(b *testing.B) {
	g, _ := (&Preprocess{Height: 513, Width: 513}).Geometry(480, 360)
	logits := make([]float32, 2*513*513)
	for i := range logits {
		logits[i] = float32(i%1000) / 1000
	}
	dst := make([]uint8, 480*360)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.RestoreLogits(logits, 2, dst); err != nil {
			b.Fatal(err)
		}
	}
}

// At the image's own size RestoreLogits skips the interpolation; the
// labels must be those of the bilinear path, ties and all, and logits
// with NaN or ±Inf must take the bilinear path.
func TestRestoreLogitsIdentityFastPath(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct{ classes, w, h int }{{1, 5, 3}, {2, 480, 36}, {2, 1, 1}, {3, 300, 7}, {7, 257, 5}, {256, 9, 4}} {
		n := tc.w * tc.h
		logits := make([]float32, tc.classes*n)
		for i := range logits {
			logits[i] = float32(r.IntN(5)) - 2 // many ties
			if r.IntN(3) == 0 {
				logits[i] = r.Float32()*8 - 4
			}
		}
		g := Geometry{SrcWidth: tc.w, SrcHeight: tc.h, Width: tc.w, Height: tc.h, Content: image.Rect(0, 0, tc.w, tc.h)}
		check := func(what string) {
			t.Helper()
			got, want := make([]uint8, n), make([]uint8, n)
			for i := range got {
				got[i] = 99 // stale contents must not survive
			}
			if err := g.RestoreLogits(logits, tc.classes, got); err != nil {
				t.Fatal(err)
			}
			g.restoreBilinear(logits, tc.classes, want)
			if !slices.Equal(got, want) {
				t.Fatalf("%d classes %dx%d %s: fast path differs from the bilinear one", tc.classes, tc.w, tc.h, what)
			}
		}
		check("finite")
		if n > 1 {
			logits[len(logits)-1] = float32(math.NaN())
			logits[0] = float32(math.Inf(1))
			check("NaN and Inf")
		}
	}
}
