package grad

import (
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/runtime"
)

func TestPersonModelTrainingGraph(t *testing.T) {
	path := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := Build(m, Config{Trainable: []string{"*"}, InputShapes: map[string][]int64{"input": {1, 3, 65, 65}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range gs.Training.Proto.Graph.Node {
		if n.GetDomain() != "" {
			t.Errorf("node %q has domain %q", n.GetName(), n.GetDomain())
		}
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
	feeds["input"] = runtime.NewFloat32([]int64{1, 3, 65, 65}, make([]float32, 3*65*65))
	feeds[TargetName] = runtime.NewInt64([]int64{1, 65, 65}, make([]int64, 65*65))
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
	_ = onnxpb.TensorProto_FLOAT
}
