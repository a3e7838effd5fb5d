// Command convprobe measures what bounds the training step's speed on this
// CPU (bench/trainstep/README.md, "Why not 0.6× PyTorch"): the SGEMM rate
// ONNX Runtime reaches, the rate of the DeepLabV3+ decoder's largest 3×3
// convolution, and the same convolution as Winograd F(2,3) in standard ONNX
// operators — the one way to do fewer FLOPs in float32 — checked against
// the direct convolution.
//
//	go run ./bench/convprobe -threads 2
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

func main() {
	threads := flag.Int("threads", 2, "ONNX Runtime intra-op threads")
	runs := flag.Int("runs", 15, "timed runs (median reported)")
	n := flag.Int64("batch", 8, "batch")
	c := flag.Int64("in", 304, "input channels")
	k := flag.Int64("out", 256, "output channels")
	hw := flag.Int64("size", 32, "height = width (even)")
	gemm := flag.Int64("gemm", 2048, "square SGEMM size")
	lib := flag.String("ort-lib", "", "ONNX Runtime library (default: segtune's search)")
	flag.Parse()
	if err := run(*threads, *runs, *n, *c, *k, *hw, *gemm, *lib); err != nil {
		fmt.Fprintln(os.Stderr, "convprobe:", err)
		os.Exit(1)
	}
}

func run(threads, runs int, n, c, k, hw, gemm int64, lib string) error {
	path, err := runtime.FindLibrary(lib)
	if err != nil {
		return err
	}
	if err := runtime.Init(path); err != nil {
		return err
	}
	if hw%2 != 0 {
		return fmt.Errorf("-size %d must be even", hw)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	randn := func(shape ...int64) *runtime.Tensor { return runtime.NewRandomNormal(rng, shape...) }
	opts := runtime.Options{Threads: threads}

	a := randn(gemm, gemm)
	ms, _, err := timeModel(matmulModel(gemm), opts, runs, a, a)
	if err != nil {
		return err
	}
	fmt.Printf("SGEMM %d³: %.1f ms, %.1f GFLOP/s\n", gemm, ms, 2*math.Pow(float64(gemm), 3)/ms/1e6)

	x, w := randn(n, c, hw, hw), randn(k, c, 3, 3)
	flops := 2 * float64(n*k*c*9*hw*hw)
	direct, yd, err := timeModel(convModel(n, c, k, hw), opts, runs, x, w)
	if err != nil {
		return err
	}
	fmt.Printf("Conv 3×3 [%d,%d,%d,%d]→%d: %.1f ms, %.1f GFLOP/s\n", n, c, hw, hw, k, direct, flops/direct/1e6)
	wino, yw, err := timeModel(winogradModel(n, c, k, hw), opts, runs, x, w)
	if err != nil {
		return err
	}
	var diff, mag float64
	for i := range yd {
		diff = math.Max(diff, math.Abs(float64(yd[i]-yw[i])))
		mag = math.Max(mag, math.Abs(float64(yd[i])))
	}
	fmt.Printf("Winograd F(2,3), same conv: %.1f ms (%.2fx the direct conv's speed; max |diff| %.2g of max |y| %.3g)\n",
		wino, direct/wino, diff, mag)
	return nil
}

// timeModel returns the median time of runs runs and the first output.
func timeModel(m *onnx.Model, opts runtime.Options, runs int, in ...*runtime.Tensor) (float64, []float32, error) {
	data, err := m.Marshal()
	if err != nil {
		return 0, nil, err
	}
	s, err := runtime.NewSession(data, opts)
	if err != nil {
		return 0, nil, err
	}
	defer s.Close()
	var out []float32
	var ts []float64
	for i := 0; i < runs+2; i++ { // two warm-up runs
		t0 := time.Now()
		o, err := s.Run(in...)
		if err != nil {
			return 0, nil, err
		}
		if i >= 2 {
			ts = append(ts, float64(time.Since(t0).Microseconds())/1e3)
		}
		out = o[0].Float32
	}
	slices.Sort(ts)
	return ts[len(ts)/2], out, nil
}

// graph builds a single-purpose probe model with the project's onnx.Builder.
type graph struct {
	*onnx.Builder
	ins, outs []*onnx.ValueInfoProto
}

func newGraph(ins, outs []*onnx.ValueInfoProto) *graph {
	return &graph{Builder: &onnx.Builder{}, ins: ins, outs: outs}
}

// shape adds a 1-D INT64 initializer holding dims (a Reshape target).
func (g *graph) shape(name string, dims ...int64) string {
	return g.ConstInt64(name, []int64{int64(len(dims))}, dims...)
}

func (g *graph) model() *onnx.Model { return onnx.NewModel(g.Graph("probe", g.ins, g.outs), 17) }

const f32 = onnx.Float32

func matmulModel(s int64) *onnx.Model {
	b := newGraph([]*onnx.ValueInfoProto{onnx.TensorValueInfo("a", f32, s, s), onnx.TensorValueInfo("b", f32, s, s)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("y", f32, s, s)})
	b.Node("MatMul", "y", []string{"a", "b"})
	return b.model()
}

func convIO(n, c, k, hw int64) ([]*onnx.ValueInfoProto, []*onnx.ValueInfoProto) {
	return []*onnx.ValueInfoProto{onnx.TensorValueInfo("x", f32, n, c, hw, hw), onnx.TensorValueInfo("w", f32, k, c, 3, 3)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("y", f32, n, k, hw, hw)}
}

func convModel(n, c, k, hw int64) *onnx.Model {
	b := newGraph(convIO(n, c, k, hw))
	b.Node("Conv", "y", []string{"x", "w"}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	return b.model()
}

// winogradModel is Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A (Lavin & Gray 2016) over
// 4×4 input tiles at stride 2, in standard operators: the input transform
// is a 4×4 stride-2 Conv of every channel, the 16 products are one batched
// MatMul [16,K,C]×[16,C,N·T], the output transform a MatMul with the 4×16
// Kronecker matrix, and DepthToSpace puts the 2×2 outputs in place.
func winogradModel(n, c, k, hw int64) *onnx.Model {
	bt := [4][4]float32{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	gm := [4][3]float32{{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}
	at := [2][4]float32{{1, 1, 1, 0}, {0, 1, -1, -1}}
	var bk, gk, ak []float32
	for a := range 4 { // Bk[ξ=4a+b, 0, r, s] = Bᵀ[a,r]·Bᵀ[b,s]
		for b := range 4 {
			for r := range 4 {
				for s := range 4 {
					bk = append(bk, bt[a][r]*bt[b][s])
				}
			}
		}
	}
	gk = make([]float32, 9*16) // Gk[3i+j, ξ] = G[a,i]·G[b,j]
	for i := range 3 {
		for j := range 3 {
			for a := range 4 {
				for b := range 4 {
					gk[(3*i+j)*16+4*a+b] = gm[a][i] * gm[b][j]
				}
			}
		}
	}
	for p := range 2 { // Ak[2p+q, ξ] = Aᵀ[p,a]·Aᵀ[q,b]
		for q := range 2 {
			for a := range 4 {
				for b := range 4 {
					ak = append(ak, at[p][a]*at[q][b])
				}
			}
		}
	}
	t := (hw / 2) * (hw / 2)
	g := newGraph(convIO(n, c, k, hw))
	g.Initializer(onnx.NewFloat32Tensor("Bk", []int64{16, 1, 4, 4}, bk))
	g.Initializer(onnx.NewFloat32Tensor("Gk", []int64{9, 16}, gk))
	g.Initializer(onnx.NewFloat32Tensor("Ak", []int64{4, 16}, ak))
	g.Node("Reshape", "xr", []string{"x", g.shape("s_xr", n*c, 1, hw, hw)})
	g.Node("Conv", "v0", []string{"xr", "Bk"}, onnx.IntsAttr("strides", 2, 2), onnx.IntsAttr("pads", 1, 1, 1, 1))
	g.Node("Reshape", "v1", []string{"v0", g.shape("s_v1", n, c, 16, t)})
	g.Node("Transpose", "v2", []string{"v1"}, onnx.IntsAttr("perm", 2, 1, 0, 3))
	g.Node("Reshape", "v", []string{"v2", g.shape("s_v", 16, c, n*t)})
	g.Node("Reshape", "g2", []string{"w", g.shape("s_g", k*c, 9)})
	g.Node("MatMul", "u0", []string{"g2", "Gk"})
	g.Node("Reshape", "u1", []string{"u0", g.shape("s_u", k, c, 16)})
	g.Node("Transpose", "u", []string{"u1"}, onnx.IntsAttr("perm", 2, 0, 1))
	g.Node("MatMul", "m", []string{"u", "v"})
	g.Node("Reshape", "m2", []string{"m", g.shape("s_m", 16, k*n*t)})
	g.Node("MatMul", "y0", []string{"Ak", "m2"})
	g.Node("Reshape", "y1", []string{"y0", g.shape("s_y1", 4, k, n, t)})
	g.Node("Transpose", "y2", []string{"y1"}, onnx.IntsAttr("perm", 2, 0, 1, 3))
	g.Node("Reshape", "y3", []string{"y2", g.shape("s_y3", n, 4*k, hw/2, hw/2)})
	g.Node("DepthToSpace", "y", []string{"y3"}, onnx.IntAttr("blocksize", 2), onnx.StringAttr("mode", "DCR"))
	return g.model()
}
