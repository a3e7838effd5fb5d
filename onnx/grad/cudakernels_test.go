package grad_test

import (
	"bufio"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/optim/optgraph"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/projection/onnxgraph"
)

// kernelRow is one row of the CUDA kernel table: the opsets it covers and
// the element types of the op's data input.
type kernelRow struct {
	from, to int64
	types    map[string]bool
}

// cudaTable is testdata/cuda_kernels.txt: op → its rows.
type cudaTable map[string][]kernelRow

// cudaKernels reads testdata/cuda_kernels.txt.
func cudaKernels(t *testing.T) cudaTable {
	t.Helper()
	f, err := os.Open("testdata/cuda_kernels.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := cudaTable{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<16)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Split(line, "\t")
		if len(fs) != 3 {
			t.Fatalf("cuda_kernels.txt: %q: want op, range and constraints", line)
		}
		row := kernelRow{types: map[string]bool{}}
		r := strings.Trim(fs[1], "[]")
		var err error
		switch {
		case strings.HasSuffix(r, "+"):
			row.to = math.MaxInt64
			row.from, err = strconv.ParseInt(strings.TrimSuffix(r, "+"), 10, 64)
		case strings.Contains(r, ","):
			_, err = fmt.Sscanf(r, "%d, %d", &row.from, &row.to)
		default:
			row.from, err = strconv.ParseInt(r, 10, 64)
			row.to = row.from
		}
		if err != nil {
			t.Fatalf("cuda_kernels.txt: %q: range %q: %v", line, fs[1], err)
		}
		cons := map[string]string{}
		for _, c := range strings.Split(fs[2], ";") {
			k, v, _ := strings.Cut(c, "=")
			cons[k] = v
		}
		data := "T"
		for _, k := range []string{"B", "T", "T1", "V"} {
			if _, ok := cons[k]; ok && (k != "B" || fs[0] == "If") {
				data = k
				break
			}
		}
		for _, ty := range strings.Split(cons[data], ",") {
			if !strings.HasPrefix(ty, "seq(") {
				row.types[ty] = true
			}
		}
		out[fs[0]] = append(out[fs[0]], row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// at returns, for a graph of default-domain opset opset, the types each
// op's kernel takes: its row whose range holds opset.
func (c cudaTable) at(opset int64) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for op, rows := range c {
		for _, r := range rows {
			if r.from <= opset && opset <= r.to {
				out[op] = r.types
			}
		}
	}
	return out
}

// opsetOf is m's default-domain opset.
func opsetOf(m *onnx.ModelProto) int64 {
	for _, o := range m.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			return o.GetVersion()
		}
	}
	return 0
}

var elemTypeNames = map[int32]string{
	1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
	9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16",
}

// checkCUDAKernels checks that every node of g, and of the subgraphs of its
// If, Loop and Scan nodes (GRAPH attributes such as then_branch and
// else_branch, checked the same way, with the enclosing scopes' element
// types visible inside), has a CUDA kernel for the element type of its data
// input, propagating element types through the graph from its inputs and
// initializers. It returns the element types of g's values.
func checkCUDAKernels(t *testing.T, name string, m *onnx.ModelProto, table cudaTable) map[string]string {
	t.Helper()
	missing := map[string]int{}
	types := checkCUDAGraph(t, name, m.GetGraph(), map[string]string{}, table.at(opsetOf(m)), missing)
	for k, c := range missing {
		t.Errorf("%s: %d nodes %s have no CUDA kernel at opset %d in testdata/cuda_kernels.txt", name, c, k, opsetOf(m))
	}
	return types
}

// checkCUDAGraph is checkCUDAKernels for g, whose enclosing scopes' element
// types are outer (left as they are: g's names shadow them in a copy). It
// counts the ops without a kernel in missing and returns g's element types.
func checkCUDAGraph(t *testing.T, name string, g *onnx.GraphProto, outer map[string]string, kernels map[string]map[string]bool, missing map[string]int) map[string]string {
	t.Helper()
	types := maps.Clone(outer)
	for _, v := range append(append(append([]*onnx.ValueInfoProto{}, g.Input...), g.ValueInfo...), g.Output...) {
		if ty, ok := elemTypeNames[v.GetType().GetTensorType().GetElemType()]; ok {
			types[v.GetName()] = ty
		}
	}
	for _, in := range g.Initializer {
		types[in.GetName()] = elemTypeNames[in.GetDataType()]
	}
	for _, n := range g.Node {
		op := n.GetOpType()
		if n.GetDomain() != "" && n.GetDomain() != "ai.onnx" {
			t.Errorf("%s: node %s: op %s of domain %s", name, n.GetName(), op, n.GetDomain())
			continue
		}
		// The data input, whose type the table lists, is input 0, but X
		// (input 1) for Where, whose input 0 is its condition. If's input 0
		// is its condition too, which the table lists as bool (see its row).
		data := 0
		if op == "Where" {
			data = 1
		}
		inType := ""
		if op != "Constant" {
			if data >= len(n.Input) {
				t.Errorf("%s: node %s (%s) has no input %d", name, n.GetName(), op, data)
				continue
			}
			inType = types[n.Input[data]]
			if inType == "" {
				t.Errorf("%s: node %s (%s): element type of %s unknown", name, n.GetName(), op, n.Input[data])
				continue
			}
			if ks, ok := kernels[op]; !ok || !ks[inType] {
				missing[op+"("+inType+")"]++
			}
			if op == "ConvTranspose" {
				for _, a := range n.Attribute {
					if k := len(a.Ints) / 2; a.GetName() == "pads" && !slices.Equal(a.Ints[:k], a.Ints[k:]) {
						missing["ConvTranspose(asymmetric pads)"]++
					}
				}
			}
		}
		// Subgraphs see the outer scope as it stands at their node; their
		// declared outputs give the node's (If: either branch; Loop: the
		// body's outputs after its condition; Scan: the body's outputs).
		var subOuts []string
		for _, a := range n.Attribute {
			subs := a.Graphs
			if a.G != nil {
				subs = append([]*onnx.GraphProto{a.G}, subs...)
			}
			for _, sg := range subs {
				st := checkCUDAGraph(t, name+"/"+n.GetName()+"."+a.GetName(), sg, types, kernels, missing)
				if subOuts != nil {
					continue
				}
				for _, o := range sg.Output {
					subOuts = append(subOuts, st[o.GetName()])
				}
				if op == "Loop" && len(subOuts) > 0 {
					subOuts = subOuts[1:]
				}
			}
		}
		out := inType
		switch op {
		case "Cast":
			for _, a := range n.Attribute {
				if a.GetName() == "to" {
					out = elemTypeNames[int32(a.GetI())]
				}
			}
		case "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "IsNaN", "IsInf":
			out = "bool"
		case "Shape", "Size", "NonZero", "ArgMax", "ArgMin":
			out = "int64"
		case "Constant", "ConstantOfShape":
			out = "float"
			for _, a := range n.Attribute {
				switch {
				case a.T != nil:
					out = elemTypeNames[a.T.GetDataType()]
				case a.GetName() == "value_int" || a.GetName() == "value_ints":
					out = "int64"
				}
			}
		}
		for i, o := range n.Output {
			switch {
			case op == "TopK" && i == 1:
				types[o] = "int64"
			case op == "If" || op == "Loop" || op == "Scan":
				if i >= len(subOuts) || subOuts[i] == "" {
					t.Errorf("%s: node %s (%s): element type of output %s unknown", name, n.GetName(), op, o)
					continue
				}
				types[o] = subOuts[i]
			default:
				types[o] = out
			}
		}
	}
	return types
}

// TestTrainingGraphsHaveCUDAKernels checks, without a GPU, that the
// inference, training and evaluation graphs of the shared person model and
// of the generated PyTorch models use only ops and element types that ONNX
// Runtime's CUDA provider has kernels for, so that no node falls back to the
// CPU for want of one.
func TestTrainingGraphsHaveCUDAKernels(t *testing.T) {
	kernels := cudaKernels(t)
	type src struct {
		name string
		load func(t *testing.T) *onnx.Model
		dims []int64
	}
	srcs := []src{
		{"person", func(t *testing.T) *onnx.Model {
			m, err := onnx.Load(testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx"))
			if err != nil {
				t.Fatal(err)
			}
			return m
		}, []int64{1, 3, 65, 65}},
	}
	for _, g := range []string{"mobilenetv2", "mobilenetv3", "resnet18"} {
		file := "deeplabv3plus_" + g + ".onnx"
		srcs = append(srcs, src{g, func(t *testing.T) *onnx.Model { return generatedModel(t, file) }, []int64{2, 3, 64, 64}})
	}
	// A transformer block, with the fused operators and decomposed.
	for _, opset := range []int64{13, 20} {
		srcs = append(srcs, src{fmt.Sprintf("transformer_block_opset%d", opset), func(*testing.T) *onnx.Model {
			m, _ := transformerBlock(opset)
			return m
		}, blockInput})
	}
	t.Run("projection", func(t *testing.T) {
		for _, et := range []onnx.DataType{onnx.Float32, onnx.Float64} {
			m, err := onnxgraph.NewModel(et, 17)
			if err != nil {
				t.Fatal(err)
			}
			checkCUDAKernels(t, "projection "+et.String(), m.Proto, kernels)
		}
	})
	for _, s := range srcs {
		t.Run(s.name, func(t *testing.T) {
			m := s.load(t)
			checkCUDAKernels(t, "inference", m.Proto, kernels)
			in := onnx.DataInputs(m.Proto.Graph)[0].GetName()
			gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, InputShapes: map[string][]int64{in: s.dims}})
			if err != nil {
				t.Fatal(err)
			}
			checkCUDAKernels(t, "training", gs.Training.Proto, kernels)
			checkCUDAKernels(t, "eval", gs.Eval.Proto, kernels)
		})
	}
	// Every loss term: focal, Dice and Lovász beside each other.
	t.Run("losses", func(t *testing.T) {
		m := generatedModel(t, "deeplabv3plus_mobilenetv2.onnx")
		in := onnx.DataInputs(m.Graph())[0].GetName()
		gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: []string{"*"}, InputShapes: map[string][]int64{in: {2, 3, 64, 64}},
			DirectConvs: true, Loss: grad.Loss{Focal: 2, Dice: 1, Lovasz: 1}})
		if err != nil {
			t.Fatal(err)
		}
		checkCUDAKernels(t, "focal+dice+lovasz training", gs.Training.Proto, kernels)
	})
	// Mixed precision: the float16 and bfloat16 training graphs in the
	// form that segtune builds for the GPU, as onnx/autocast's tests build
	// them (bfloat16 at opset 22, whose Conv takes it).
	for _, s := range srcs {
		if s.name != "mobilenetv2" && s.name != "resnet18" {
			continue
		}
		for _, typ := range []autocast.Type{autocast.Float16, autocast.BFloat16} {
			prec := typ.String()
			t.Run(s.name+"/"+prec, func(t *testing.T) {
				m := s.load(t)
				var params []string // exact names: Apply hides them from consumer-based patterns
				for name := range onnx.ParameterNames(m.Graph()) {
					params = append(params, "re:"+regexp.QuoteMeta(name))
				}
				r, err := autocast.Apply(m, typ)
				if err != nil {
					t.Fatal(err)
				}
				if r.Nodes == 0 {
					t.Fatalf("autocast moved no operator to %s", prec)
				}
				in := onnx.DataInputs(m.Graph())[0].GetName()
				gs, err := grad.Build(m, grad.Config{Prober: ortprobe.Prober{}, Trainable: params, Loss: grad.Loss{Scale: typ == autocast.Float16},
					InputShapes: map[string][]int64{in: s.dims}, DirectConvs: true, WeightGradConv: true, MinOpset: typ.MinOpset()})
				if err != nil {
					t.Fatal(err)
				}
				if len(gs.Params) != len(params) {
					t.Fatalf("%d of %d parameters trainable", len(gs.Params), len(params))
				}
				types := checkCUDAKernels(t, prec+" training", gs.Training.Proto, kernels)
				half := map[string]int{} // op → nodes whose first input is in half precision
				for _, n := range gs.Training.Proto.Graph.Node {
					if len(n.Input) > 0 && types[n.Input[0]] == prec {
						half[n.GetOpType()]++
					}
				}
				if half["Conv"] == 0 {
					t.Fatalf("no Conv of the training graph reads %s: %v", prec, half)
				}
				t.Logf("opset %d: training nodes reading %s of %d: %v", opsetOf(gs.Training.Proto), prec, len(gs.Training.Proto.Graph.Node), half)
				checkCUDAKernels(t, prec+" eval", gs.Eval.Proto, kernels)
			})
		}
	}
	// The optimiser step graph, with its If on a finite gradient norm.
	specs := []optgraph.Spec{
		{Name: "conv.weight", Shape: []int64{5, 3, 3, 3}},
		{Name: "conv.bias", Shape: []int64{5}},
		{Name: "fc.weight", Shape: []int64{7, 11}},
		{Name: "norm.scale", Shape: []int64{13}},
	}
	for _, c := range []struct {
		name      string
		cfg       func() optim.Config
		gradScale bool
	}{
		{"sgd", func() optim.Config {
			c := optim.DefaultConfig(optim.SGD)
			c.Momentum, c.Nesterov, c.WeightDecay = 0.9, true, 1e-2
			return c
		}, false},
		{"adam", func() optim.Config { return optim.DefaultConfig(optim.Adam) }, false},
		{"adamw", func() optim.Config {
			c := optim.DefaultConfig(optim.AdamW)
			c.NoDecay, c.MaxGradNorm = optim.NoDecayVectors, 1
			return c
		}, true},
	} {
		t.Run("optimizer/"+c.name, func(t *testing.T) {
			cfg := c.cfg()
			l, err := optgraph.NewLayout(specs, cfg)
			if err != nil {
				t.Fatal(err)
			}
			m, err := optgraph.Build(l, cfg, optgraph.Options{GradScale: c.gradScale})
			if err != nil {
				t.Fatal(err)
			}
			ifs := 0
			for _, n := range m.Proto.Graph.Node {
				if n.GetOpType() == "If" {
					ifs++
				}
			}
			if ifs == 0 {
				t.Fatal("the optimiser graph has no If")
			}
			checkCUDAKernels(t, "optimizer "+c.name, m.Proto, kernels)
		})
	}
}
