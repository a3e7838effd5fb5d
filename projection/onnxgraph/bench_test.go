package onnxgraph

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/projection"
	"github.com/segtune/segtune/runtime"
)

var benchSizes = []int{1_000, 10_000, 100_000}

func benchGamma(n int) []float64 {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	return normals(r, n, 0, 1)
}

// BenchmarkGraph times one ONNX Runtime call of the standalone projection
// model (CPU), ORT call overhead included: tensor creation, Run, copying
// the outputs back. threads=1 is one intra-op thread; threads=0 lets ORT
// choose.
func BenchmarkGraph(b *testing.B) {
	initRuntime(b)
	for _, dt := range []onnx.DataType{onnx.Float32, onnx.Float64} {
		for _, threads := range []int{1, 0} {
			m, err := NewModel(dt, opsetTest)
			if err != nil {
				b.Fatal(err)
			}
			data, _ := m.Marshal()
			s, err := runtime.NewSession(data, runtime.Options{Threads: threads})
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range benchSizes {
				gamma := benchGamma(n)
				name := fmt.Sprintf("%s/threads=%d/n=%d", dt.String(), threads, n)
				b.Run(name, func(b *testing.B) {
					g32 := f32(gamma)
					for b.Loop() {
						var tau, d *runtime.Tensor
						if dt == onnx.Float64 {
							tau, d = runtime.NewFloat64([]int64{int64(n)}, gamma), runtime.NewFloat64([]int64{1}, []float64{0})
						} else {
							tau, d = runtime.NewFloat32([]int64{int64(n)}, g32), runtime.NewFloat32([]int64{1}, []float32{0})
						}
						if _, err := s.Run(tau, d); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			s.Close()
		}
	}
}

// BenchmarkPivot times projection.ProjectPivot on the same data (the input
// copy excluded, as in package projection's benchmarks).
func BenchmarkPivot(b *testing.B) {
	for _, n := range benchSizes {
		gamma := benchGamma(n)
		b.Run(fmt.Sprintf("FLOAT/n=%d", n), func(b *testing.B) { benchPivot(b, f32(gamma)) })
		b.Run(fmt.Sprintf("DOUBLE/n=%d", n), func(b *testing.B) { benchPivot(b, gamma) })
	}
}

func benchPivot[T projection.Float](b *testing.B, src []T) {
	work, scratch := make([]T, len(src)), make([]T, len(src))
	for b.Loop() {
		b.StopTimer()
		copy(work, src)
		b.StartTimer()
		if _, err := projection.ProjectPivot(0, work, scratch); err != nil {
			b.Fatal(err)
		}
	}
}
