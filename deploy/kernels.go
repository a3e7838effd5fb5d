package deploy

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

// Kernels is what ONNX Runtime made of a model: the operators of the graph
// it runs after its optimisations (QDQ groups fused into QLinearConv and
// friends, Casts it inserted for float16 operators its CPU provider lacks).
type Kernels struct {
	// Ops counts the optimised graph's nodes by operator
	// ("com.microsoft.QLinearConv" for other domains than ONNX's).
	Ops map[string]int `json:"ops"`
	// InsertedCasts counts the Cast nodes ONNX Runtime added at the
	// edges of the float16 regions it runs in float32 because this
	// provider lacks their float16 kernels (after merging the Casts
	// between such nodes, so the count is of regions' edges, not nodes).
	InsertedCasts int `json:"inserted_casts"`
	// Integer counts the nodes computing on 8-bit tensors (QLinear*,
	// ConvInteger, MatMulInteger…) and QDQ the QuantizeLinear/
	// DequantizeLinear nodes left unfused.
	Integer int `json:"integer_nodes"`
	QDQ     int `json:"unfused_qdq"`
	// Error is set when ONNX Runtime could not write its optimised graph.
	Error string `json:"error,omitempty"`
}

// ReadKernels opens model in ONNX Runtime with opts, has it write the
// graph it optimised, and summarises it.
func ReadKernels(model []byte, opts runtime.Options) *Kernels {
	k := &Kernels{Ops: map[string]int{}}
	dir, err := os.MkdirTemp("", "segtune-kernels-")
	if err != nil {
		k.Error = err.Error()
		return k
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "optimized.onnx")
	opts.Tuning.OptimizedModelPath = path
	s, err := runtime.NewSession(model, opts)
	if err != nil {
		k.Error = err.Error()
		return k
	}
	s.Close()
	m, err := onnx.Load(path)
	if err != nil {
		k.Error = err.Error()
		return k
	}
	g := m.Graph()
	for _, n := range g.GetNode() {
		op := n.GetOpType()
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			op = d + "." + op
		}
		k.Ops[op]++
		switch {
		case strings.HasPrefix(n.GetOpType(), "QLinear") || strings.HasSuffix(n.GetOpType(), "Integer") ||
			n.GetOpType() == "DynamicQuantizeLinear" || n.GetOpType() == "QGemm":
			k.Integer++
		case n.GetOpType() == "QuantizeLinear" || n.GetOpType() == "DequantizeLinear":
			k.QDQ++
		case n.GetOpType() == "Cast" && strings.HasPrefix(n.GetName(), "InsertedPrecisionFreeCast"):
			// The names ORT's InsertCastTransformer gives its Casts.
			k.InsertedCasts++
		}
	}
	return k
}
