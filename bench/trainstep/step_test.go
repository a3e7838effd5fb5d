package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
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
	testassets.RequireORT(t)
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
