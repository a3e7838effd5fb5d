package runtime

import (
	goruntime "runtime"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// An output Run allocates is onnxruntime_go's Go copy of ONNX Runtime's
// memory, handed over as it is: a run allocates its outputs' bytes once,
// not twice (the second copy was fromOrt's).
func TestRunHandsOverOutputsWithoutACopy(t *testing.T) {
	requireORT(t)
	const n = 1 << 20 // 4 MiB an output: far above the run's small allocations
	g := &onnx.Builder{}
	g.Node("Relu", "y", []string{"x"})
	g.Node("Neg", "z", []string{"x"})
	m := onnx.NewModel(g.Graph("two",
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("x", onnxpb.TensorProto_FLOAT, 1, n)},
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("y", onnxpb.TensorProto_FLOAT, 1, n), onnx.TensorValueInfo("z", onnxpb.TensorProto_FLOAT, 1, n)}), 17)
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSession(b, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i%5) - 2
	}
	x := NewFloat32([]int64{1, n}, in)
	if _, err := s.Run(x); err != nil { // ONNX Runtime's first-run allocations
		t.Fatal(err)
	}
	const runs = 4
	var before, after goruntime.MemStats
	var out []*Tensor
	goruntime.ReadMemStats(&before)
	for range runs {
		if out, err = s.Run(x); err != nil {
			t.Fatal(err)
		}
	}
	goruntime.ReadMemStats(&after)
	for i, v := range in {
		if out[0].Float32[i] != max(v, 0) || out[1].Float32[i] != -v {
			t.Fatalf("at %d: y %v z %v for x %v", i, out[0].Float32[i], out[1].Float32[i], v)
		}
	}
	outBytes := uint64(2 * 4 * n)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > outBytes*5/4 {
		t.Fatalf("a run allocated %d bytes of Go memory for %d bytes of outputs: copied more than once", perRun, outBytes)
	}
}
