package inference_test

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/runtime"
)

// Once a run on an input's dims has given the scores' shape (the probe at
// Open, for a fixed size), ONNX Runtime writes the scores straight into a
// pooled buffer: the outputs carry a Release, a buffer comes back only
// once every output of its batch is released, and what is written is the
// model's scores, as a plain session gives them, image after image.
func TestScoresGoIntoReleasedBuffers(t *testing.T) {
	model := convModel(t, 3, weights(2*3*3*3, 5))
	pre := imageio.Preprocess{Height: 24, Width: 32}
	s := open(t, model, pre)
	bare, err := runtime.NewSession(model, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	shape := pipeline.Shape{3, 24, 32}
	input := func(seed uint64, n int) []float32 {
		var b []float32
		for i := range n {
			p, err := s.Prepare(noise(40, 30, seed+uint64(i)))
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, p.Input...)
		}
		return b
	}
	infer := func(b []float32, n int, pooled bool) []pipeline.Output {
		t.Helper()
		outs, err := s.Infer(b, n, shape)
		if err != nil {
			t.Fatal(err)
		}
		want, err := bare.Run(runtime.NewFloat32([]int64{int64(n), 3, 24, 32}, b))
		if err != nil {
			t.Fatal(err)
		}
		size := len(want[0].Float32) / n
		for i, o := range outs {
			if (o.Release != nil) != pooled {
				t.Fatalf("output %d of a batch of %d: Release set %v, want %v (scores written into a pooled buffer)", i, n, o.Release != nil, pooled)
			}
			if !slices.Equal(o.Data, want[0].Float32[i*size:(i+1)*size]) {
				t.Fatalf("output %d of a batch of %d differs from the session's scores", i, n)
			}
		}
		return outs
	}
	// Released buffers are used again: twenty images one after another
	// take one buffer, not 20.
	seen := map[*float32]bool{}
	for i := range 20 {
		o := infer(input(uint64(i), 1), 1, true)
		seen[&o[0].Data[0]] = true
		o[0].Release()
	}
	if len(seen) != 1 {
		t.Errorf("20 images one after another took %d score buffers", len(seen))
	}
	// An output not released keeps its buffer.
	held := infer(input(100, 1), 1, true)
	for i := range 10 {
		o := infer(input(uint64(101+i), 1), 1, true)
		if &o[0].Data[0] == &held[0].Data[0] {
			t.Fatal("an output's buffer was handed out again before it was released")
		}
		o[0].Release()
	}
	held[0].Release()

	// A batch's outputs share one buffer: it comes back with the last of
	// them. The first batch of two learns its scores' shape.
	infer(input(200, 2), 2, false)
	pair := infer(input(202, 2), 2, true)
	pair[0].Release()
	for i := range 10 {
		o := infer(input(uint64(210+2*i), 2), 2, true)
		if &o[0].Data[0] == &pair[0].Data[0] {
			t.Fatal("a batch's buffer was handed out again while one of its outputs was still held")
		}
		o[0].Release()
		o[1].Release()
	}
	pair[1].Release()
}
