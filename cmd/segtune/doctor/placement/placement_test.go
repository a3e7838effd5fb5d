package placement

import (
	"reflect"
	"testing"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
)

// Without a CUDA provider nothing is loaded or run, whatever the file:
// the report says why.
func TestPlaceWithoutCUDA(t *testing.T) {
	r := Place("/nonexistent/model.onnx", 64, 64, false)
	if want := []string{"CUDA unavailable: placement not checked"}; !reflect.DeepEqual(r.Errors, want) {
		t.Errorf("errors %q, want %q", r.Errors, want)
	}
	if r.Inference != nil || r.Training != nil || r.InputDims != nil {
		t.Errorf("a placement without CUDA: %+v", r)
	}
}

// A missing model is an error of the report, not a panic.
func TestPlaceMissingModel(t *testing.T) {
	r := Place("/nonexistent/model.onnx", 64, 64, true)
	if len(r.Errors) != 1 || r.InputDims != nil {
		t.Errorf("report %+v", r)
	}
}

// Dynamic dimensions take batch 1, 3 channels and the size asked for;
// fixed ones stay.
func TestInputDims(t *testing.T) {
	m, err := onnx.Parse(models.SynthModel, "")
	if err != nil {
		t.Fatal(err)
	}
	name, dims, err := inputDims(m, 40, 56)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{1, 3, 40, 56}; name == "" || !reflect.DeepEqual(dims, want) {
		t.Errorf("synth model: %q %v, want %v", name, dims, want)
	}
	lin, err := models.LinearClassifier([]int64{2, 1, 28, 28}, 10, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, dims, err := inputDims(lin, 40, 56); err != nil || !reflect.DeepEqual(dims[1:], []int64{2, 1, 28, 28}) {
		t.Errorf("fixed input: %v %v", dims, err)
	}
}
