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

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxpb"
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
	randn := func(shape ...int64) *runtime.Tensor {
		size := int64(1)
		for _, d := range shape {
			size *= d
		}
		v := make([]float32, size)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return runtime.NewFloat32(shape, v)
	}
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

// graph is a small helper for building single-purpose models.
type graph struct{ g *onnxpb.GraphProto }

func (b *graph) node(op string, in []string, out string, attrs ...*onnxpb.AttributeProto) {
	b.g.Node = append(b.g.Node, &onnxpb.NodeProto{Name: proto.String(out), OpType: proto.String(op),
		Input: in, Output: []string{out}, Attribute: attrs})
}

func (b *graph) shape(name string, dims ...int64) string {
	b.g.Initializer = append(b.g.Initializer, onnx.NewInt64Tensor(name, []int64{int64(len(dims))}, dims))
	return name
}

func (b *graph) model() *onnx.Model {
	return &onnx.Model{Proto: &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph:       b.g,
	}}
}

func newGraph(ins, outs []*onnxpb.ValueInfoProto) *graph {
	return &graph{g: &onnxpb.GraphProto{Name: proto.String("probe"), Input: ins, Output: outs}}
}

const f32 = onnxpb.TensorProto_FLOAT

func matmulModel(s int64) *onnx.Model {
	b := newGraph([]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("a", f32, s, s), onnx.TensorValueInfo("b", f32, s, s)},
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("y", f32, s, s)})
	b.node("MatMul", []string{"a", "b"}, "y")
	return b.model()
}

func convIO(n, c, k, hw int64) ([]*onnxpb.ValueInfoProto, []*onnxpb.ValueInfoProto) {
	return []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("x", f32, n, c, hw, hw), onnx.TensorValueInfo("w", f32, k, c, 3, 3)},
		[]*onnxpb.ValueInfoProto{onnx.TensorValueInfo("y", f32, n, k, hw, hw)}
}

func convModel(n, c, k, hw int64) *onnx.Model {
	b := newGraph(convIO(n, c, k, hw))
	b.node("Conv", []string{"x", "w"}, "y", onnx.IntsAttr("pads", 1, 1, 1, 1))
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
	g.g.Initializer = append(g.g.Initializer,
		onnx.NewFloat32Tensor("Bk", []int64{16, 1, 4, 4}, bk),
		onnx.NewFloat32Tensor("Gk", []int64{9, 16}, gk),
		onnx.NewFloat32Tensor("Ak", []int64{4, 16}, ak))
	g.node("Reshape", []string{"x", g.shape("s_xr", n*c, 1, hw, hw)}, "xr")
	g.node("Conv", []string{"xr", "Bk"}, "v0", onnx.IntsAttr("strides", 2, 2), onnx.IntsAttr("pads", 1, 1, 1, 1))
	g.node("Reshape", []string{"v0", g.shape("s_v1", n, c, 16, t)}, "v1")
	g.node("Transpose", []string{"v1"}, "v2", onnx.IntsAttr("perm", 2, 1, 0, 3))
	g.node("Reshape", []string{"v2", g.shape("s_v", 16, c, n*t)}, "v")
	g.node("Reshape", []string{"w", g.shape("s_g", k*c, 9)}, "g2")
	g.node("MatMul", []string{"g2", "Gk"}, "u0")
	g.node("Reshape", []string{"u0", g.shape("s_u", k, c, 16)}, "u1")
	g.node("Transpose", []string{"u1"}, "u", onnx.IntsAttr("perm", 2, 0, 1))
	g.node("MatMul", []string{"u", "v"}, "m")
	g.node("Reshape", []string{"m", g.shape("s_m", 16, k*n*t)}, "m2")
	g.node("MatMul", []string{"Ak", "m2"}, "y0")
	g.node("Reshape", []string{"y0", g.shape("s_y1", 4, k, n, t)}, "y1")
	g.node("Transpose", []string{"y1"}, "y2", onnx.IntsAttr("perm", 2, 0, 1, 3))
	g.node("Reshape", []string{"y2", g.shape("s_y3", n, 4*k, hw/2, hw/2)}, "y3")
	g.node("DepthToSpace", []string{"y3"}, "y", onnx.IntAttr("blocksize", 2), onnx.StringAttr("mode", "DCR"))
	return g.model()
}
