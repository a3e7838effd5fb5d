package grad_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

func TestPersonModelTrainingGraph(t *testing.T) {
	t.Run("dynamic", func(t *testing.T) { personModel(t, "deeplabv3plus_person_dynamic.onnx", 65) })
	t.Run("513", func(t *testing.T) { personModel(t, "deeplabv3plus_person_513.onnx", 513) })
}

func personModel(t *testing.T, file string, size int64) {
	path := testassets.Require(t, "models", file)
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, InputShapes: map[string][]int64{"input": {1, 3, size, size}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range gs.Training.Proto.Graph.Node {
		if n.GetDomain() != "" {
			t.Errorf("node %q has domain %q", n.GetName(), n.GetDomain())
		}
	}
	if imp := gs.Training.Proto.GetOpsetImport(); len(imp) != 1 || imp[0].GetDomain() != "" || imp[0].GetVersion() != grad.TargetOpset {
		t.Errorf("opset imports %v, want only the default domain at %d", imp, grad.TargetOpset)
	}
	floats := 0
	for _, init := range m.Proto.Graph.Initializer {
		if init.GetDataType() == 1 {
			floats++
		}
	}
	if len(gs.Params) != floats {
		t.Errorf("%d trainable parameters, the model has %d float initializers", len(gs.Params), floats)
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	feeds := map[string]*runtime.Tensor{}
	feeds["input"] = runtime.NewFloat32([]int64{1, 3, size, size}, make([]float32, 3*size*size))
	feeds[grad.TargetName] = runtime.NewInt64([]int64{1, size, size}, make([]int64, size*size))
	for _, p := range gs.Params {
		v, _ := onnx.Float32s(p)
		feeds[p.GetName()] = runtime.NewFloat32(p.GetDims(), v)
	}
	var in []*runtime.Tensor
	for _, x := range s.Inputs {
		in = append(in, feeds[x.Name])
	}
	out, err := s.Run(in...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %v, %d outputs, %d nodes", out[0].Float32, len(out), len(gs.Training.Proto.Graph.Node))
	for i, o := range s.Outputs {
		if o.Type != "float32" {
			continue
		}
		for _, v := range out[i].Float32 {
			if v != v {
				t.Fatalf("output %q holds NaN", o.Name)
			}
		}
	}
	if os.Getenv("SEGTUNE_DUMP_TRAINING") != "" {
		if err := gs.Training.Save(filepath.Join(os.Getenv("SEGTUNE_DUMP_TRAINING"), file)); err != nil {
			t.Fatal(err)
		}
	}
}
