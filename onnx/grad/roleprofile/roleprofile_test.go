package roleprofile

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/ortprofile"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// Recorded: testdata/step.profile.json is ONNX Runtime 1.30's CPU profile
// of three steps of testdata/step.onnx, the training graph of tinyNet
// (rewrite both with SEGTUNE_RECORD_ROLEPROFILE=1 go test -run TestLive).
const (
	recordedProfile = "testdata/step.profile.json"
	recordedGraph   = "testdata/step.onnx"
)

// tinyNet is a small segmenter with one convolution of each class: a
// dense 3×3 stem with ReLU, a depthwise 3×3 with ReLU6 (Clip), a grouped
// 3×3 and a pointwise classifier.
func tinyNet() *onnx.Model {
	var nodes []*onnx.NodeProto
	var inits []*onnx.TensorProto
	b := &onnx.Builder{Nodes: &nodes, Inits: &inits}
	rng := rand.New(rand.NewPCG(1, 2))
	param := func(name string, dims ...int64) string {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.3)
		}
		return b.Initializer(onnx.NewFloat32Tensor(name, dims, v))
	}
	pads := onnx.IntsAttr("pads", 1, 1, 1, 1)
	b.Emit("Conv", "stem", []string{"input", param("stem.w", 8, 3, 3, 3), param("stem.b", 8)}, []string{"s"}, pads)
	b.Emit("Relu", "stem_relu", []string{"s"}, []string{"sr"})
	b.Emit("Conv", "dw", []string{"sr", param("dw.w", 8, 1, 3, 3), param("dw.b", 8)}, []string{"d"}, pads, onnx.IntAttr("group", 8))
	b.Emit("Clip", "dw_relu6", []string{"d", b.ConstFloat("lo", onnx.Float32, nil, 0), b.ConstFloat("hi", onnx.Float32, nil, 6)}, []string{"dr"})
	b.Emit("Conv", "grouped", []string{"dr", param("grouped.w", 8, 4, 3, 3)}, []string{"gr"}, pads, onnx.IntAttr("group", 2))
	b.Emit("Conv", "classifier", []string{"gr", param("classifier.w", 3, 8, 1, 1), param("classifier.b", 3)}, []string{"logits"})
	g := b.Graph("tiny", []*onnx.ValueInfoProto{onnx.TensorValueInfo("input", onnx.Float32, 2, 3, 12, 12)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("logits", onnx.Float32, 2, 3, 12, 12)})
	return onnx.NewModel(g, 17)
}

// record runs three training steps of tinyNet with ONNX Runtime's
// profiler and returns the profile's nodes and the training graph.
func record(t *testing.T) ([]ortprofile.Node, *onnx.Model, string) {
	gs, err := grad.Build(tinyNet(), grad.Config{Prober: ortprobe.Prober{Threads: 1}, Trainable: []string{"*"}, DirectConvs: true})
	if err != nil {
		t.Fatal(err)
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), "step")
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1, Tuning: runtime.Tuning{ProfilePrefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	var in []*runtime.Tensor
	for _, x := range s.Inputs {
		n := 1
		for _, d := range x.Shape {
			n *= int(d)
		}
		switch {
		case x.Name == grad.TargetName:
			v := make([]int64, n)
			for i := range v {
				v[i] = int64(i % 3)
			}
			in = append(in, runtime.NewInt64(x.Shape, v))
		default:
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(math.Sin(float64(i)))
			}
			in = append(in, runtime.NewFloat32(x.Shape, v))
		}
	}
	for range 3 {
		if _, err := s.Run(in...); err != nil {
			s.Close()
			t.Fatal(err)
		}
	}
	s.Close()
	path, err := ortprofile.Newest(prefix)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ortprofile.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return nodes, gs.Training, path
}

// TestLive records a step's profile and groups it.
func TestLive(t *testing.T) {
	runtimetest.Require(t)
	nodes, m, path := record(t)
	checkTable(t, nodes, m.Graph())
	if os.Getenv("SEGTUNE_RECORD_ROLEPROFILE") == "1" {
		prof, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.Write(recordedProfile, prof, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.Write(recordedGraph, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTable: the roles of a training step are all there, the rows add up
// to the profile's kernel total, and nothing is left unattributed.
func checkTable(t *testing.T, nodes []ortprofile.Node, g *onnx.GraphProto) Table {
	t.Helper()
	tab := Group(nodes, g, nil)
	total, sum := 0.0, 0.0
	for _, n := range nodes {
		total += n.Ms()
	}
	count := 0
	roles := map[string]bool{}
	for _, r := range tab.Rows {
		sum += r.Ms
		count += r.Nodes
		roles[r.Role] = true
	}
	if math.Abs(sum-total) > 1e-9*max(total, 1) || math.Abs(tab.TotalMs-total) > 1e-9*max(total, 1) || count != len(nodes) {
		t.Errorf("rows sum to %g ms over %d nodes (table total %g), the profile to %g over %d", sum, count, tab.TotalMs, total, len(nodes))
	}
	for _, want := range []string{Forward, grad.RoleLoss, grad.RoleDataGrad, grad.RoleWeightGrad, grad.RoleBiasGrad} {
		if !roles[want] {
			t.Errorf("no %q row in %+v", want, tab.Rows)
		}
	}
	if roles[Other] {
		t.Errorf("profiled nodes not found in the graph: %+v", tab.Rows)
	}
	return tab
}

// TestRecorded groups the recorded profile: every role is found, the rows
// add up to the profile's kernel total, and nodes ONNX Runtime fused or
// renamed, and convolutions of each class, land where they belong.
func TestRecorded(t *testing.T) {
	nodes, err := ortprofile.Read(recordedProfile)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Load(recordedGraph)
	if err != nil {
		t.Fatal(err)
	}
	tab := checkTable(t, nodes, m.Graph())
	var sb strings.Builder
	tab.Write(&sb)
	t.Log("\n" + sb.String())
	byName := map[string]*onnx.NodeProto{}
	for _, n := range m.Graph().GetNode() {
		byName[n.GetName()] = n
	}
	classes := map[string]string{}
	for _, n := range nodes {
		role, class := NodeRole(n.Name, n.Op, byName)
		if role == Forward && class != "" {
			classes[n.Name] = class
		}
		if n.Op == "FusedMatMul" && (role != grad.RoleWeightGrad || class == "") {
			t.Errorf("%s (%s, ONNX Runtime's fusion of a conv weight gradient's MatMul): %q %q", n.Name, n.Op, role, class)
		}
	}
	want := map[string]string{"stem": "dense", "dw": "depthwise", "grouped": "grouped", "classifier": "pointwise"}
	if len(classes) != len(want) {
		t.Errorf("forward convolutions %v, want %v", classes, want)
	}
	for name, c := range want {
		if classes[name] != c {
			t.Errorf("forward convolution %s: class %q, want %q", name, classes[name], c)
		}
	}
	for _, tc := range []struct{ name, op, role string }{
		{"Memcpy_token_1", "MemcpyToHost", Copies},
		{"Transpose_token_1", "Transpose", Copies}, // ONNX Runtime's layout pass
		{"bwd/node_Reshape_46_new_reshape", "Reshape", Copies},
		{"stem_relu", "Relu", Forward},
		{"stemX", "Conv", Other}, // a prefix not followed by a separator
	} {
		if role, _ := NodeRole(tc.name, tc.op, byName); role != tc.role {
			t.Errorf("%s (%s): role %q, want %q", tc.name, tc.op, role, tc.role)
		}
	}
	// An optimiser session's nodes add to its own row and to the total.
	opt := []ortprofile.Node{{Name: "adam", Op: "Add", RunsMs: []float64{9, 2, 3}}}
	with := Group(nodes, m.Graph(), opt)
	if math.Abs(with.TotalMs-tab.TotalMs-2) > 1e-9 || with.Rows[0].Role != Optimiser || with.Rows[0].Ms != 2 {
		t.Errorf("with an optimiser of 2 ms: total %g (was %g), first row %+v", with.TotalMs, tab.TotalMs, with.Rows[0])
	}
}
