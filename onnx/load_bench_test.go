package onnx

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkLoad16MB loads a model of one 16 MB initializer: B/op is what
// Load allocates besides the parsed tensor itself (the file's bytes).
//
//	go test ./onnx -run '^$' -bench Load16MB -benchmem
func BenchmarkLoad16MB(b *testing.B) {
	bl := &Builder{}
	w := bl.Initializer(NewFloat32Tensor("w", []int64{4 << 20}, make([]float32, 4<<20)))
	bl.Emit("Identity", "id", []string{w}, []string{"y"})
	m := NewModel(bl.Graph("big", nil, []*ValueInfoProto{TensorValueInfo("y", Float32, 4<<20)}), 17)
	path := filepath.Join(b.TempDir(), "big.onnx")
	if err := m.Save(path); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}
