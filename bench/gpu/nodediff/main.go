// Command nodediff finds the node of a training graph where a device's
// results first diverge from the CPU's:
//
//	go run ./bench/gpu/nodediff --model testdata/generated/deeplabv3plus_mobilenetv2.onnx \
//	    --batch 2 --size 128 --device cuda [--cuda-opt use_tf32=0] [--top 25] \
//	    [--json rows.json] [--direct-convs=true] [--wgrad-conv]
//
// It compiles the model's training graph as bench/trainstep does (every
// parameter trainable, the same seeded image and target), makes every
// float32 output of every node (forward and backward) a graph output, runs
// the graph once on the CPU (the reference, default optimisations) and once
// on --device, and compares each tensor. With --device cpu (a dry run) the
// second run is a CPU session with graph optimisations disabled and one
// thread (the reference uses ONNX Runtime's default thread count).
//
// Output:
//   - "first divergent nodes": the first 10 nodes, in graph order, whose
//     output relative error exceeds 1e-5;
//   - "top amplification": the nodes whose output error is largest relative
//     to the largest error of their inputs. Errors are relative L2,
//     ‖device − cpu‖/‖cpu‖ (the absolute ‖device − cpu‖ where ‖cpu‖ = 0),
//     accumulated in float64; "max abs" is the largest elementwise
//     difference. An input the tool did not compare (graph inputs,
//     initializers, non-float tensors) counts as exact. Amplification is
//     out_err / max(in_err, 1.19e-7) (float32 epsilon as the floor), so a node
//     with exact inputs and float32 rounding has amplification about 1, and
//     a node that turns a small input error into a large one stands out;
//   - the 10 parameter gradients (grad/...) with the largest error;
//   - one line per op type: node count, max output error, max amplification.
//
// Making every intermediate tensor a graph output blocks the fusions of the
// providers that would hide it; the gradient errors printed show whether the
// divergence survives that.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/segtune/segtune/bench/internal/trainfeed"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"google.golang.org/protobuf/proto"
)

// Row is the comparison of one float output of one node.
type Row struct {
	Node   int     `json:"node"`
	Name   string  `json:"name"`
	Op     string  `json:"op"`
	Output string  `json:"output"`
	RelErr float64 `json:"rel_err"`
	MaxAbs float64 `json:"max_abs"`
	InErr  float64 `json:"input_err"`
	Amp    float64 `json:"amplification"`
	Numel  int     `json:"numel"`
	Note   string  `json:"note,omitempty"`
}

const (
	divergeAt = 1e-5
	ampFloor  = 1.1920929e-7
)

func main() {
	model := flag.String("model", "testdata/generated/deeplabv3plus_mobilenetv2.onnx", "inference ONNX model")
	batch := flag.Int("batch", 2, "batch size")
	size := flag.Int("size", 128, "input height and width")
	device := flag.String("device", "cuda", "device compared against the CPU (cpu: dry run against an unoptimised CPU session)")
	cudaOpt := flag.String("cuda-opt", "use_tf32=0", "CUDA provider options k=v,k=v")
	top := flag.Int("top", 25, "nodes listed by amplification")
	jsonPath := flag.String("json", "", "write every row to this file")
	direct := flag.Bool("direct-convs", true, "keep every convolution a Conv node (grad.Config.DirectConvs; the GPU form)")
	wgrad := flag.Bool("wgrad-conv", false, "Conv weight gradients as one Conv (grad.Config.WeightGradConv)")
	ortLib := flag.String("ort-lib", "", "ONNX Runtime library (default: $ONNXRUNTIME_SHARED_LIBRARY_PATH or the cached one)")
	flag.Parse()
	if err := run(*model, *batch, *size, *device, *cudaOpt, *top, *jsonPath, *direct, *wgrad, *ortLib); err != nil {
		fmt.Fprintln(os.Stderr, "nodediff:", err)
		os.Exit(1)
	}
}

func run(model string, batch, size int, device, cudaOpt string, top int, jsonPath string, direct, wgrad bool, ortLib string) error {
	t0 := time.Now()
	device = strings.ToLower(device)
	if err := runtime.InitFor(ortLib, device); err != nil {
		return err
	}
	fmt.Printf("ONNX Runtime: %s\n", runtime.LibraryPath())
	m, err := onnx.Load(model)
	if err != nil {
		return err
	}
	in := m.Graph().GetInput()[0].GetName()
	gs, err := grad.Build(m, grad.Config{
		Prober:           ortprobe.Prober{},
		Trainable:        []string{"*"},
		InputShapes:      map[string][]int64{in: {int64(batch), 3, int64(size), int64(size)}},
		DirectConvs:      direct,
		MatrixReductions: direct,
		WeightGradConv:   wgrad,
	})
	if err != nil {
		return fmt.Errorf("grad.Build: %w", err)
	}
	g := gs.Training.Proto.Graph
	nodes := g.Node // exposeAll appends Reshape nodes after these
	data, floats, err := exposeAll(gs.Training)
	if err != nil {
		return err
	}
	fmt.Printf("training graph: %d nodes, %d float32 tensors compared (build %.1fs)\n", len(nodes), len(floats), time.Since(t0).Seconds())

	feeds, err := makeFeeds(data, gs, batch, size)
	if err != nil {
		return err
	}
	t1 := time.Now()
	ref, err := runOnce(data, feeds, runtime.Options{Device: runtime.DeviceCPU, Tuning: runtime.Tuning{NoMemPattern: true}}, "cpu")
	if err != nil {
		return fmt.Errorf("reference CPU run: %w", err)
	}
	fmt.Printf("CPU reference run: %.1fs\n", time.Since(t1).Seconds())
	opts := runtime.Options{Device: device, Tuning: runtime.Tuning{NoMemPattern: true}}
	label := device
	if device == runtime.DeviceCPU {
		opts.NoOptimize, opts.Threads = true, 1
		label = "cpu (no graph optimisations, 1 thread)"
	} else {
		opts.CUDAOptions = parseKV(cudaOpt)
		label = fmt.Sprintf("%s %v", device, opts.CUDAOptions)
	}
	t2 := time.Now()
	dev, err := runOnce(data, feeds, opts, device)
	if err != nil {
		return fmt.Errorf("%s run: %w", label, err)
	}
	fmt.Printf("%s run: %.1fs\n", label, time.Since(t2).Seconds())

	rows := compare(nodes, ref, dev)
	report(rows, top)
	if jsonPath != "" {
		b, err := json.MarshalIndent(rows, "", " ")
		if err != nil {
			return err
		}
		if err := atomicfile.Write(jsonPath, b, 0o644); err != nil {
			return err
		}
		fmt.Printf("wrote %d rows to %s\n", len(rows), jsonPath)
	}
	fmt.Printf("total %.1fs\n", time.Since(t0).Seconds())
	return nil
}

// flatSuffix names the Reshape([-1]) copy through which a tensor of rank 0
// (or of a rank ONNX Runtime does not infer) is exposed: onnxruntime_go
// cannot read rank-0 outputs.
const flatSuffix = "#nodediff_flat"

// exposeAll makes every node output a graph output, asks ONNX Runtime for
// their element types, and keeps the float32 ones (typed FLOAT, no shape).
// It returns the serialized graph and the set of float32 tensors. The nodes
// it appends come after the original ones; compare reads only those.
func exposeAll(m *onnx.Model) ([]byte, map[string]bool, error) {
	g := m.Proto.Graph
	orig := g.Output
	have := map[string]bool{}
	for _, o := range orig {
		have[o.GetName()] = true
	}
	var extra []string
	for _, n := range g.Node {
		for _, o := range n.Output {
			if o != "" && !have[o] {
				have[o] = true
				extra = append(extra, o)
			}
		}
	}
	g.Output = append([]*onnx.ValueInfoProto{}, orig...)
	for _, name := range extra {
		g.Output = append(g.Output, &onnx.ValueInfoProto{Name: proto.String(name)})
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, nil, err
	}
	_, outs, err := runtime.ReadIO(data)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the types of the exposed tensors: %w", err)
	}
	info := map[string]runtime.IOInfo{}
	for _, o := range outs {
		info[o.Name] = o
	}
	floats := map[string]bool{}
	g.Output = append([]*onnx.ValueInfoProto{}, orig...)
	for _, o := range orig {
		if info[o.GetName()].Type == "float32" {
			floats[o.GetName()] = true
		}
	}
	flatShape := "nodediff/flat_shape"
	addedShape := false
	for _, name := range extra {
		if info[name].Type != "float32" {
			continue
		}
		floats[name] = true
		out := name
		if len(info[name].Shape) == 0 {
			out = name + flatSuffix
			if !addedShape {
				g.Initializer = append(g.Initializer, &onnx.TensorProto{Name: proto.String(flatShape),
					DataType: proto.Int32(int32(onnx.Int64)), Dims: []int64{1}, Int64Data: []int64{-1}})
				addedShape = true
			}
			g.Node = append(g.Node, &onnx.NodeProto{OpType: proto.String("Reshape"), Name: proto.String(out),
				Input: []string{name, flatShape}, Output: []string{out}})
		}
		g.Output = append(g.Output, &onnx.ValueInfoProto{Name: proto.String(out), Type: &onnx.TypeProto{
			Value: &onnx.TensorTypeValue{TensorType: &onnx.TensorTypeProto{ElemType: proto.Int32(int32(onnx.Float32))}},
		}})
	}
	data, err = m.Marshal()
	return data, floats, err
}

// makeFeeds builds bench/trainstep's seeded feeds (trainfeed) in the order
// of the serialized graph's inputs (as ONNX Runtime reads them, i.e. as a
// Session's Inputs).
func makeFeeds(data []byte, gs *grad.Graphs, batch, size int) ([]*runtime.Tensor, error) {
	ins, _, err := runtime.ReadIO(data)
	if err != nil {
		return nil, err
	}
	params, err := trainfeed.Params(gs)
	if err != nil {
		return nil, err
	}
	return trainfeed.Feeds(ins, params, trainfeed.NewBatch(gs, batch, size), 1), nil
}

// runOnce opens a session, checks it runs where asked, runs it once and
// returns its outputs by name.
func runOnce(data []byte, feeds []*runtime.Tensor, opts runtime.Options, want string) (map[string]*runtime.Tensor, error) {
	s, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, fmt.Errorf("opening the session: %w", err)
	}
	defer s.Close()
	if s.Device != want {
		fmt.Fprintf(os.Stderr, "nodediff: the %s session fell back to %s\n", want, s.Device)
		os.Exit(1)
	}
	outs, err := s.Run(feeds...)
	if err != nil {
		return nil, fmt.Errorf("running: %w", err)
	}
	res := make(map[string]*runtime.Tensor, len(outs))
	for i, o := range outs {
		if o != nil {
			res[strings.TrimSuffix(s.Outputs[i].Name, flatSuffix)] = o
		}
	}
	return res, nil
}

func parseKV(s string) map[string]string {
	var m map[string]string
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if m == nil {
				m = map[string]string{}
			}
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// diff is the relative L2 error of a against the reference b and the max
// absolute difference; NaN or Inf anywhere gives +Inf.
func diff(a, b *runtime.Tensor) (rel, maxAbs float64, note string) {
	if a == nil || b == nil {
		return math.Inf(1), math.Inf(1), "missing output"
	}
	if a.Float32 == nil || b.Float32 == nil || len(a.Float32) != len(b.Float32) || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
		return math.Inf(1), math.Inf(1), fmt.Sprintf("shape %v vs %v", a.Shape, b.Shape)
	}
	var nd, nb float64
	for i, x := range a.Float32 {
		y := float64(b.Float32[i])
		d := float64(x) - y
		nd += d * d
		nb += y * y
		if ad := math.Abs(d); ad > maxAbs || math.IsNaN(ad) {
			maxAbs = ad
		}
	}
	if math.IsNaN(nd) || math.IsInf(nd, 0) || math.IsNaN(nb) || math.IsInf(nb, 0) {
		return math.Inf(1), maxAbs, "NaN or Inf"
	}
	if nb == 0 {
		return math.Sqrt(nd), maxAbs, "zero reference (absolute error)"
	}
	return math.Sqrt(nd / nb), maxAbs, ""
}

// compare makes one row per compared output, in node order.
func compare(nodes []*onnx.NodeProto, ref, dev map[string]*runtime.Tensor) []Row {
	errOf := map[string]float64{}
	var rows []Row
	for i, n := range nodes {
		inErr := 0.0
		for _, x := range n.Input {
			if e, ok := errOf[x]; ok && e > inErr {
				inErr = e
			}
		}
		for _, o := range n.Output {
			b, ok := ref[o]
			if !ok || b.Float32 == nil {
				continue
			}
			rel, maxAbs, note := diff(dev[o], b)
			errOf[o] = rel
			amp := rel / math.Max(inErr, ampFloor)
			if math.IsInf(inErr, 1) {
				amp = 0
			}
			rows = append(rows, Row{Node: i, Name: n.GetName(), Op: n.GetOpType(), Output: o, RelErr: rel, MaxAbs: maxAbs,
				InErr: inErr, Amp: amp, Numel: len(b.Float32), Note: note})
		}
	}
	return rows
}

func report(rows []Row, top int) {
	line := func(r Row) {
		note := ""
		if r.Note != "" {
			note = "  [" + r.Note + "]"
		}
		fmt.Printf("  #%-5d %-22s %-48s out %-9.3g in %-9.3g amp %-9.3g maxabs %-9.3g n=%d  -> %s%s\n",
			r.Node, r.Op, trunc(r.Name, 48), r.RelErr, r.InErr, r.Amp, r.MaxAbs, r.Numel, trunc(r.Output, 60), note)
	}
	fmt.Printf("\nfirst divergent nodes (output rel err > %g), in graph order:\n", divergeAt)
	k := 0
	for _, r := range rows {
		if r.RelErr > divergeAt {
			line(r)
			if k++; k == 10 {
				break
			}
		}
	}
	if k == 0 {
		fmt.Println("  none")
	}
	// A node's amplification is that of its worst output.
	best := map[int]Row{}
	for _, r := range rows {
		if b, ok := best[r.Node]; !ok || r.Amp > b.Amp {
			best[r.Node] = r
		}
	}
	byAmp := make([]Row, 0, len(best))
	for _, r := range best {
		byAmp = append(byAmp, r)
	}
	sort.Slice(byAmp, func(i, j int) bool {
		if byAmp[i].Amp != byAmp[j].Amp {
			return byAmp[i].Amp > byAmp[j].Amp
		}
		return byAmp[i].Node < byAmp[j].Node
	})
	fmt.Printf("\ntop %d nodes by amplification (out err / max(in err, %.3g)):\n", top, ampFloor)
	for i, r := range byAmp {
		if i == top {
			break
		}
		line(r)
	}
	var grads []Row
	for _, r := range rows {
		if strings.HasPrefix(r.Output, grad.GradPrefix) || r.Output == grad.LossName {
			grads = append(grads, r)
		}
	}
	sort.Slice(grads, func(i, j int) bool { return grads[i].RelErr > grads[j].RelErr })
	fmt.Printf("\nparameter gradients (and loss) by error, top 10 of %d:\n", len(grads))
	for i, r := range grads {
		if i == 10 {
			break
		}
		line(r)
	}
	type agg struct {
		count        int
		maxErr, mAmp float64
	}
	ops := map[string]*agg{}
	for _, r := range best {
		a := ops[r.Op]
		if a == nil {
			a = &agg{}
			ops[r.Op] = a
		}
		a.count++
		a.mAmp = math.Max(a.mAmp, r.Amp)
	}
	for _, r := range rows {
		ops[r.Op].maxErr = math.Max(ops[r.Op].maxErr, r.RelErr)
	}
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if ops[names[i]].mAmp != ops[names[j]].mAmp {
			return ops[names[i]].mAmp > ops[names[j]].mAmp
		}
		return names[i] < names[j]
	})
	fmt.Printf("\nper op type (by max amplification):\n  %-24s %6s %10s %10s\n", "op", "nodes", "max err", "max amp")
	for _, k := range names {
		a := ops[k]
		fmt.Printf("  %-24s %6d %10.3g %10.3g\n", k, a.count, a.maxErr, a.mAmp)
	}
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n+1:]
}
