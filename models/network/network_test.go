package network

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func personModel(t *testing.T, name string) *onnx.Model {
	t.Helper()
	m, err := onnx.Load(testassets.Require(t, "models", name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLayersAndPresets(t *testing.T) {
	m := personModel(t, "deeplabv3plus_person_dynamic.onnx")
	layers, err := Layers(m)
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 60 { // the model's 60 Conv nodes
		t.Fatalf("%d layers, want 60", len(layers))
	}
	cls, err := Classifier(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cls.Node.GetOutput()[0], "logits") {
		t.Errorf("classifier = %s", cls.Node.GetOutput()[0])
	}
	all, _ := Trainable(m, "all")
	only, _ := Trainable(m, "classifier")
	dec, _ := Trainable(m, "decoder")
	skip, _ := Trainable(m, "skip:10")
	last, _ := Trainable(m, "last:1")
	if !slices.Equal(only, cls.Params) || !slices.Equal(last, only) {
		t.Errorf("classifier %v, last:1 %v, want %v", only, last, cls.Params)
	}
	if !(len(only) < len(dec) && len(dec) < len(skip) && len(skip) < len(all)) {
		t.Errorf("sizes: classifier %d, decoder %d, skip:10 %d, all %d", len(only), len(dec), len(skip), len(all))
	}
	pat, err := Trainable(m, "*logits*")
	if err != nil || len(pat) == 0 {
		t.Errorf("pattern: %v %v", pat, err)
	}
	for _, bad := range []string{"nothing*", "last:999", "skip:x", "re:("} {
		if _, err := Trainable(m, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A new 12-class head must give a model that ONNX Runtime runs with 12
// output channels, for the dynamic and the fixed-size model alike.
func TestReplaceClassifierRuns(t *testing.T) {
	runtimetest.Require(t)
	for _, name := range []string{"deeplabv3plus_person_dynamic.onnx", "deeplabv3plus_person_513.onnx"} {
		t.Run(name, func(t *testing.T) {
			m := personModel(t, name)
			if err := ReplaceClassifier(m, 12, 1); err != nil {
				t.Fatal(err)
			}
			data, _ := m.Marshal()
			s, err := runtime.NewSession(data, runtime.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := int64(65)
			if strings.Contains(name, "513") {
				h = 513
			}
			in := make([]float32, 3*h*h)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range in {
				in[i] = rng.Float32()*2 - 1
			}
			out, err := s.Run(runtime.NewFloat32([]int64{1, 3, h, h}, in))
			if err != nil {
				t.Fatal(err)
			}
			if out[0].Shape[1] != 12 {
				t.Fatalf("output shape %v", out[0].Shape)
			}
		})
	}
}

func TestSetWeightsChecksShapes(t *testing.T) {
	m := personModel(t, "deeplabv3plus_person_dynamic.onnx")
	cls, _ := Classifier(m)
	w := m.Initializer(cls.Params[0])
	n, _ := onnx.NumElements(w.Dims)
	vals := make([]float32, n)
	vals[0] = 42
	if err := SetWeights(m, []Weight{{Name: cls.Params[0], Shape: w.Dims, Data: vals}}); err != nil {
		t.Fatal(err)
	}
	got, _ := onnx.Float32s(m.Initializer(cls.Params[0]))
	if got[0] != 42 {
		t.Error("weight not written")
	}
	if err := SetWeights(m, []Weight{{Name: cls.Params[0], Shape: []int64{1}, Data: []float32{1}}}); err == nil {
		t.Error("wrong shape accepted")
	}
	if err := SetWeights(m, []Weight{{Name: "nope", Shape: []int64{1}, Data: []float32{1}}}); err == nil {
		t.Error("unknown name accepted")
	}
}
