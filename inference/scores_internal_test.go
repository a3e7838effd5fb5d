package inference

import (
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// openSmall opens model, its contract read from the graph, on 8×8
// inputs and one thread (the internal twin of dense_test.go's open).
func openSmall(t *testing.T, model []byte) *Segmenter {
	t.Helper()
	m, err := onnx.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(model, ct, imageio.Preprocess{Height: 8, Width: 8}, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A remembered scores' shape that no longer holds (a model whose output
// size changed for the same input) costs one more run, not the image: the
// run is made again without a buffer, and the shape learnt anew.
func TestStaleScoreShapeIsRunAgain(t *testing.T) {
	runtimetest.Require(t)
	b := &onnx.Builder{}
	w := make([]float32, 2*3)
	for i := range w {
		w[i] = float32(i) - 2.5
	}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, w))
	b.Emit("Conv", "conv", []string{"input", wt}, []string{"logits"})
	f32 := onnx.Float32
	model, err := onnx.NewModel(b.Graph("conv",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, "h", "w")}), 17).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s := openSmall(t, model)
	key := [4]int64{1, 3, 8, 8}
	if s.knownScoreShape(key[:]) == nil {
		t.Fatal("the probe did not learn the scores' shape")
	}
	s.learnScoreShape(key[:], []int64{1, 2, 4, 4}) // stale
	in := make([]float32, 3*8*8)
	for i := range in {
		in[i] = float32(i % 7)
	}
	outs, err := s.Infer(in, 1, pipeline.Shape{3, 8, 8})
	if err != nil {
		t.Fatalf("a stale shape failed the image: %v", err)
	}
	if outs[0].Release != nil || len(outs[0].Data) != 2*8*8 {
		t.Fatalf("the run again gave %d values (pooled %v)", len(outs[0].Data), outs[0].Release != nil)
	}
	if got := s.knownScoreShape(key[:]); len(got) != 4 || got[2] != 8 {
		t.Fatalf("the shape was not learnt again: %v", got)
	}
	if outs, err = s.Infer(in, 1, pipeline.Shape{3, 8, 8}); err != nil || outs[0].Release == nil {
		t.Fatalf("the next run did not use a pooled buffer: %v", err)
	}
}

// A batch whose pooled scores fail Infer's checks (here non-finite) gives
// the buffer back for the next run, and leaves none held.
func TestFailedBatchGivesItsScoresBack(t *testing.T) {
	runtimetest.Require(t)
	b := &onnx.Builder{}
	w := make([]float32, 2*3)
	for i := range w {
		w[i] = float32(i) - 2.5
	}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, w))
	b.Emit("Conv", "conv", []string{"input", wt}, []string{"raw"})
	b.Emit("Sqrt", "sqrt", []string{"raw"}, []string{"logits"}) // NaN where the conv is negative
	f32 := onnx.Float32
	model, err := onnx.NewModel(b.Graph("conv",
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("input", f32, 1, 3, 8, 8)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("logits", f32, 1, 2, 8, 8)}), 17).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s := openSmall(t, model)
	in := make([]float32, 3*8*8)
	for i := range in {
		in[i] = 1 // conv: -2.5-1.5-0.5 < 0 for the first class
	}
	kept := len(s.scores.kept)
	if kept == 0 {
		t.Fatal("the probe left no scores buffer to reuse")
	}
	if _, err := s.Infer(in, 1, pipeline.Shape{3, 8, 8}); err == nil {
		t.Fatal("non-finite scores were accepted")
	}
	if got := len(s.scores.kept); got != kept || s.ScoresHeld() != 0 {
		t.Fatalf("after a failed batch %d buffers kept (want %d), %d held", got, kept, s.ScoresHeld())
	}
}
