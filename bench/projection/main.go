// Command projection benchmarks the Π_C projections of package projection
// against one plain pass over the data (the memory-bound floor) and prints a
// Markdown table of median ns per element.
//
//	go run ./bench/projection -runs 7 -max 10000000
//
// Each sample projects K independent copies of the same random input
// (γ_i ~ N(0,1), δ = 0, random order) with K·n ≥ 2^17, so small n are not
// dominated by timer resolution; the copies are refreshed between samples
// outside the timed region. "pivot" and "sort" are the full in-place
// projections (threshold plus clamp) with preallocated scratch; "floor" is a
// 4-accumulator sum over the same buffers.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/segtune/segtune/projection"
)

func sum4[T projection.Float](x []T) float64 {
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

// sink receives every projection's result, so that no call is dead code.
//
//lint:ignore U1000 written and never read, on purpose
var sink float64

// measure returns the median ns/element of method over runs samples.
func measure[T projection.Float](n, runs int, method string) float64 {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	src := make([]T, n)
	for i := range src {
		src[i] = T(r.NormFloat64())
	}
	k := max(1, (1<<17)/n)
	bufs := make([][]T, k)
	for i := range bufs {
		bufs[i] = make([]T, n)
	}
	scratch := make([]T, n)
	samples := make([]float64, 0, runs)
	for range runs + 1 { // first run warms up and is discarded
		for _, b := range bufs {
			copy(b, src)
		}
		start := time.Now()
		for _, b := range bufs {
			var e T
			var err error
			switch method {
			case "pivot":
				e, err = projection.ProjectPivot(0, b, scratch)
			case "sort":
				e, err = projection.ProjectSort(0, b, scratch)
			case "floor":
				e = T(sum4(b))
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			sink += float64(e)
		}
		samples = append(samples, float64(time.Since(start).Nanoseconds())/float64(n*k))
	}
	samples = samples[1:]
	slices.Sort(samples)
	return samples[len(samples)/2]
}

func main() {
	runs := flag.Int("runs", 7, "timed samples per cell (median reported)")
	maxN := flag.Int("max", 10_000_000, "largest n")
	flag.Parse()
	fmt.Printf("GOOS=%s GOARCH=%s NumCPU=%d GOMAXPROCS=%d %s\n\n", runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Println("| n | type | floor ns/elem | pivot ns/elem | sort ns/elem | pivot/floor | sort/floor |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for n := 1000; n <= *maxN; n *= 10 {
		r := *runs
		if n >= 10_000_000 {
			r = max(3, r/2)
		}
		row := func(typ string, f, p, s float64) {
			fmt.Printf("| %d | %s | %.3f | %.3f | %.3f | %.2f | %.2f |\n", n, typ, f, p, s, p/f, s/f)
		}
		row("float32", measure[float32](n, r, "floor"), measure[float32](n, r, "pivot"), measure[float32](n, r, "sort"))
		row("float64", measure[float64](n, r, "floor"), measure[float64](n, r, "pivot"), measure[float64](n, r, "sort"))
	}
}
