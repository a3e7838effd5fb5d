package main

import (
	"os"
	"path/filepath"
	"testing"
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
