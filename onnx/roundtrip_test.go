package onnx_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// sharedModels returns the ONNX models among the shared test assets, which
// live outside the repository: $SEGTUNE_SHARED_ASSETS, or the first
// shared/assets folder found walking up from the working directory. The test
// is skipped when there are none.
func sharedModels(t *testing.T) []string {
	t.Helper()
	root := os.Getenv("SEGTUNE_SHARED_ASSETS")
	if root == "" {
		dir, err := os.Getwd()
		for err == nil {
			if st, e := os.Stat(filepath.Join(dir, "shared", "assets")); e == nil && st.IsDir() {
				root = filepath.Join(dir, "shared", "assets")
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
			dir = filepath.Dir(dir)
		}
	}
	models, _ := filepath.Glob(filepath.Join(root, "models", "*.onnx"))
	if root == "" || len(models) == 0 {
		testassets.SkipOrFail(t, "no shared test models (set SEGTUNE_SHARED_ASSETS)")
	}
	return models
}

// TestRoundTripSharedModels checks that Load -> Save -> Load is lossless and
// that ONNX Runtime computes bit-identical outputs from the saved model.
func TestRoundTripSharedModels(t *testing.T) {
	for _, path := range sharedModels(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			m, err := onnx.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			saved := filepath.Join(t.TempDir(), "saved.onnx")
			if err := m.Save(saved); err != nil {
				t.Fatal(err)
			}
			back, err := onnx.Load(saved)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(m.Proto, back.Proto) {
				t.Fatal("model changed in a save/load round trip")
			}
			if _, err := onnx.TopoSort(back.Graph()); err != nil {
				t.Error(err)
			}
			if s := back.Summary(); s.Parameters == 0 || len(s.Inputs) == 0 {
				t.Errorf("implausible summary:\n%s", s)
			}
			compareOutputs(t, path, saved, m)
		})
	}
}

func compareOutputs(t *testing.T, original, saved string, m *onnx.Model) {
	if testing.Short() {
		t.Skip("running the models through ONNX Runtime is skipped in -short mode")
	}
	runtimetest.Require(t)
	inputs := onnx.DataInputs(m.Graph())
	var feeds []*runtime.Tensor
	rng := rand.New(rand.NewPCG(1, 2))
	for _, in := range inputs {
		if typ := onnx.TypeString(in.GetType()); typ != "float32" {
			t.Skipf("input %s is %s; only float32 inputs are fed", in.GetName(), typ)
		}
		var shape []int64
		n := 1
		for _, d := range onnx.Dims(in.GetType()) {
			v, err := strconv.ParseInt(d, 10, 64)
			if err != nil {
				v = 65 // a small size for dynamic dims keeps the test fast
			}
			shape = append(shape, v)
			n *= int(v)
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = rng.Float32()
		}
		feeds = append(feeds, runtime.NewFloat32(shape, data))
	}
	run := func(path string) []*runtime.Tensor {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := runtime.NewSession(data, runtime.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.Run(feeds...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := run(original), run(saved)
	for i := range want {
		if len(got[i].Float32) != len(want[i].Float32) || len(want[i].Float32) == 0 {
			t.Fatalf("output %d: %d values, want %d", i, len(got[i].Float32), len(want[i].Float32))
		}
		for j, v := range want[i].Float32 {
			if math.Float32bits(got[i].Float32[j]) != math.Float32bits(v) {
				t.Fatalf("output %d differs at %d: %v, want %v", i, j, got[i].Float32[j], v)
			}
		}
	}
}
