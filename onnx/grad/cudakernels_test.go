package grad_test

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/onnxpb"
	"github.com/segtune/segtune/projection/onnxgraph"
)

// cudaKernels reads testdata/cuda_kernels.txt: op → element types its CUDA
// kernel takes.
func cudaKernels(t *testing.T) map[string]map[string]bool {
	t.Helper()
	f, err := os.Open("testdata/cuda_kernels.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		out[fs[0]] = map[string]bool{}
		for _, ty := range fs[1:] {
			out[fs[0]][ty] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var elemTypeNames = map[int32]string{
	1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "string",
	9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 16: "bfloat16",
}

// checkCUDAKernels checks that every node of g has a CUDA kernel for the
// element type of its data input, propagating element types through the
// graph from its inputs and initializers.
func checkCUDAKernels(t *testing.T, name string, g *onnxpb.GraphProto, kernels map[string]map[string]bool) {
	t.Helper()
	types := map[string]string{}
	for _, v := range append(append([]*onnxpb.ValueInfoProto{}, g.Input...), g.ValueInfo...) {
		if ty, ok := elemTypeNames[v.GetType().GetTensorType().GetElemType()]; ok {
			types[v.GetName()] = ty
		}
	}
	for _, in := range g.Initializer {
		types[in.GetName()] = elemTypeNames[in.GetDataType()]
	}
	missing := map[string]int{}
	for _, n := range g.Node {
		op := n.GetOpType()
		if n.GetDomain() != "" && n.GetDomain() != "ai.onnx" {
			t.Errorf("%s: node %s: op %s of domain %s", name, n.GetName(), op, n.GetDomain())
			continue
		}
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
			if op == "TopK" && i == 1 {
				types[o] = "int64"
				continue
			}
			types[o] = out
		}
	}
	for k, c := range missing {
		t.Errorf("%s: %d nodes %s have no CUDA kernel in testdata/cuda_kernels.txt", name, c, k)
	}
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
	t.Run("projection", func(t *testing.T) {
		for _, et := range []onnxpb.TensorProto_DataType{onnxpb.TensorProto_FLOAT, onnxpb.TensorProto_DOUBLE} {
			m, err := onnxgraph.NewModel(et, 17)
			if err != nil {
				t.Fatal(err)
			}
			checkCUDAKernels(t, "projection "+et.String(), m.Proto.Graph, kernels)
		}
	})
	for _, s := range srcs {
		t.Run(s.name, func(t *testing.T) {
			m := s.load(t)
			checkCUDAKernels(t, "inference", m.Proto.Graph, kernels)
			in := onnx.DataInputs(m.Proto.Graph)[0].GetName()
			gs, err := grad.Build(m, grad.Config{Trainable: []string{"*"}, InputShapes: map[string][]int64{in: s.dims}})
			if err != nil {
				t.Fatal(err)
			}
			checkCUDAKernels(t, "training", gs.Training.Proto.Graph, kernels)
			checkCUDAKernels(t, "eval", gs.Eval.Proto.Graph, kernels)
		})
	}
}
