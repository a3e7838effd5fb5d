package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func generated(b *testing.B) string {
	p := filepath.Join("..", "..", "testdata", "generated", "deeplabv3plus_mobilenetv2.onnx")
	if _, err := os.Stat(p); err != nil {
		b.Skip("testdata/generated/deeplabv3plus_mobilenetv2.onnx is missing: run python3 scripts/gen_torch_models.py --out testdata/generated")
	}
	return p
}

// BenchmarkTrainStep times one training step of the MobileNetV2 DeepLabV3+
// at batch 8, 128×128, every parameter trainable, 2 threads.
func BenchmarkTrainStep(b *testing.B) {
	st, err := NewStepper(generated(b), 8, 128, 2, "cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if err := st.Step(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := st.Step(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestResidentStepsLearnAtEveryPrecision: the resident stepper's updates
// change the loss at fp32 and at fp16, where the gradients are unscaled by
// the optimiser graph (an integer 1/1024 once made that factor zero, and
// fp16 steps were timed on a model that never moved).
func TestResidentStepsLearnAtEveryPrecision(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Generated(t, "deeplabv3plus_mobilenetv2.onnx")
	defer func(o string, r bool, p string) { Optim, Resident, Precision = o, r, p }(Optim, Resident, Precision)
	for _, p := range []string{"fp32", "fp16"} {
		Optim, Resident, Precision = "sgd", true, p
		r, err := Run(model, 2, 64, 1, 2, 1, "cpu")
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(r.Losses) != 3 || r.SkippedSteps != 0 {
			t.Fatalf("%s: losses %v, %d skipped; want 3 finite, none skipped", p, r.Losses, r.SkippedSteps)
		}
		for _, l := range r.Losses {
			if l == nil {
				t.Fatalf("%s: a loss is not finite", p)
			}
		}
		if *r.Losses[0] == *r.Losses[2] {
			t.Errorf("%s: the loss stayed %v over three steps: the updates did nothing", p, *r.Losses[0])
		}
	}
}

// TestLeversReported: --convgrad and --cuda-graph are read and checked
// (a class that does not exist, CUDA graphs without the resident state),
// and the JSON result reports them: the classes as asked, CUDA graphs as
// they ran (off on the CPU, where they are ignored). The ConvGrad nodes
// run on the operator's CPU kernel, which trainfeed.ConvGradKernels
// registers.
func TestLeversReported(t *testing.T) {
	defer func(o string, r, g bool, c grad.ConvClasses) { Optim, Resident, CUDAGraph, ConvGrad = o, r, g, c }(Optim, Resident, CUDAGraph, ConvGrad)
	Resident, CUDAGraph = false, true
	if err := setLevers("none"); err == nil || !strings.Contains(err.Error(), "--resident") {
		t.Errorf("--cuda-graph without --resident: %v", err)
	}
	Resident = true
	if err := setLevers("dense,sideways"); err == nil || !strings.Contains(err.Error(), "--convgrad dense,sideways") {
		t.Errorf("--convgrad dense,sideways: %v", err)
	}
	if err := setLevers("dense,pointwise"); err != nil {
		t.Fatal(err)
	}
	runtimetest.Require(t)
	model := testassets.Generated(t, "deeplabv3plus_mobilenetv2.onnx")
	Optim = "sgd"
	r, err := Run(model, 2, 64, 1, 1, 0, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if r.Ops[grad.ConvGradDomain+"."+grad.ConvGradOp] == 0 {
		t.Error("--convgrad dense,pointwise wrote no ConvGrad node")
	}
	if got["convgrad"] != "dense,pointwise" || got["cuda_graph"] != false || got["cuda_graph_optimizer"] != false {
		t.Errorf("JSON levers: convgrad %v, cuda_graph %v, cuda_graph_optimizer %v; want dense,pointwise, false, false",
			got["convgrad"], got["cuda_graph"], got["cuda_graph_optimizer"])
	}
}
