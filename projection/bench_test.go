package projection

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// sumFloor is one plain pass over the data (4 independent accumulators, so
// the add latency does not hide the memory bandwidth): the floor any
// projection must pay to read its input once.
func sumFloor[T Float](x []T) float64 {
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a += float64(x[i])
		b += float64(x[i+1])
		c += float64(x[i+2])
		d += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		a += float64(x[i])
	}
	return a + b + c + d
}

func benchData[T Float](n int) []T {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	g := make([]T, n)
	for i := range g {
		g[i] = T(r.NormFloat64())
	}
	return g
}

var sink float64

func benchProject[T Float](b *testing.B, n int, method string) {
	src := benchData[T](n)
	work := make([]T, n)
	scratch := make([]T, n)
	b.SetBytes(int64(n) * int64(sizeOf[T]()))
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		copy(work, src)
		b.StartTimer()
		var e T
		var err error
		switch method {
		case "sort":
			e, err = ProjectSort(0, work, scratch)
		case "pivot":
			e, err = ProjectPivot(0, work, scratch)
		case "floor":
			e = T(sumFloor(work))
		}
		if err != nil {
			b.Fatal(err)
		}
		sink += float64(e)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/elem")
}

func sizeOf[T Float]() int {
	if T(1)+T(0x1p-30) == T(1) {
		return 4
	}
	return 8
}

// BenchmarkProject: go test -run=^$ -bench=Project -benchtime=3x ./projection
func BenchmarkProject(b *testing.B) {
	for _, n := range []int{1e3, 1e4, 1e5, 1e6, 1e7} {
		for _, m := range []string{"floor", "pivot", "sort"} {
			b.Run(fmt.Sprintf("%s/f32/n=%d", m, n), func(b *testing.B) { benchProject[float32](b, n, m) })
			b.Run(fmt.Sprintf("%s/f64/n=%d", m, n), func(b *testing.B) { benchProject[float64](b, n, m) })
		}
	}
}
