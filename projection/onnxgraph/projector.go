package onnxgraph

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// Projector runs the projection graph and its vector–Jacobian product in
// ONNX Runtime: the graph Append builds, differentiated by onnx/grad and run
// in float64. It implements dual.Projector, which is how `segtune finetune
// --projection graph` trains through Π_C (docs/method.md §8).
//
// One session serves one length n. Apply is not safe for concurrent use.
type Projector struct {
	sess  *runtime.Session
	n     int
	feeds []*runtime.Tensor
	// Positions of the session's inputs and outputs.
	inTau, inDelta, inUpTau, inUpThr   int
	outTau, outThr, outGTau, outGDelta int
}

// NewProjector compiles the projection of a length-n τ with its gradient and
// opens it in ONNX Runtime (runtime.Init must have run).
func NewProjector(n int, opts runtime.Options) (*Projector, error) {
	if n < 1 {
		return nil, fmt.Errorf("onnxgraph: projector length %d < 1", n)
	}
	m, tauProj, thr, err := parameterModel(make([]float32, n), 0, MinOpset)
	if err != nil {
		return nil, err
	}
	gs, err := grad.Build(m, grad.Config{
		Prober:     ortprobe.Prober{},
		Trainable:  []string{"tau", "delta"},
		Loss:       grad.Loss{Kind: grad.LossNone},
		GradInputs: []string{tauProj, thr},
	})
	if err != nil {
		return nil, fmt.Errorf("onnxgraph: projector gradient: %w", err)
	}
	// Double precision keeps the projection as exact as package projection's.
	data, err := onnx.ToFloat64(gs.Training).Marshal()
	if err != nil {
		return nil, err
	}
	sess, err := runtime.NewSession(data, opts)
	if err != nil {
		return nil, fmt.Errorf("onnxgraph: projector session: %w", err)
	}
	p := &Projector{sess: sess, n: n, feeds: make([]*runtime.Tensor, len(sess.Inputs))}
	p.inTau, p.inDelta = sess.InputIndex("tau"), sess.InputIndex("delta")
	p.inUpTau, p.inUpThr = sess.InputIndex(grad.GradInPrefix+tauProj), sess.InputIndex(grad.GradInPrefix+thr)
	p.outTau, p.outThr = sess.OutputIndex(tauProj), sess.OutputIndex(thr)
	p.outGTau, p.outGDelta = sess.OutputIndex(grad.GradPrefix+"tau"), sess.OutputIndex(grad.GradPrefix+"delta")
	for _, i := range []int{p.inTau, p.inDelta, p.inUpTau, p.inUpThr, p.outTau, p.outThr, p.outGTau, p.outGDelta} {
		if i < 0 {
			sess.Close()
			return nil, fmt.Errorf("onnxgraph: projector graph lacks an input or output (%v, %v)", sess.Inputs, sess.Outputs)
		}
	}
	if len(sess.Inputs) != 4 {
		sess.Close()
		return nil, fmt.Errorf("onnxgraph: projector graph has %d inputs, want 4", len(sess.Inputs))
	}
	return p, nil
}

// parameterModel is a model whose τ ("tau", [n]) and δ ("delta", [1]) are
// float initializers, so that onnx/grad can treat them as the trainable
// parameters (the compiled graph takes them as inputs), and whose outputs
// are τ* and ō, named tauProj and threshold.
func parameterModel(tau []float32, delta float32, opset int64) (m *onnx.Model, tauProj, threshold string, err error) {
	g := &onnx.GraphProto{Name: proto.String("projection"), Initializer: []*onnx.TensorProto{
		onnx.NewFloat32Tensor("tau", []int64{int64(len(tau))}, tau),
		onnx.NewFloat32Tensor("delta", []int64{1}, []float32{delta}),
	}}
	if tauProj, threshold, err = Append(g, opset, "tau", "delta", "proj"); err != nil {
		return nil, "", "", err
	}
	g.Output = []*onnx.ValueInfoProto{{Name: proto.String(tauProj)}, {Name: proto.String(threshold)}}
	return onnx.NewModel(g, opset), tauProj, threshold, nil
}

// Len is the length of τ the projector was built for.
func (p *Projector) Len() int { return p.n }

// Apply projects (δ, τ) = (delta, tau): it writes τ* = min(τ, ō) to tauProj
// and returns ō; for upstream gradients dTauProj, dThreshold it writes ∂/∂τ
// to dTau and returns ∂/∂δ. Every slice has length Len().
func (p *Projector) Apply(tau []float64, delta float64, dTauProj []float64, dThreshold float64,
	tauProj, dTau []float64) (threshold, dDelta float64, err error) {
	n := int64(p.n)
	if len(tau) != p.n || len(dTauProj) != p.n || len(tauProj) != p.n || len(dTau) != p.n {
		return 0, 0, fmt.Errorf("onnxgraph: projector of length %d got %d, %d, %d, %d values",
			p.n, len(tau), len(dTauProj), len(tauProj), len(dTau))
	}
	p.feeds[p.inTau] = runtime.NewFloat64([]int64{n}, tau)
	p.feeds[p.inDelta] = runtime.NewFloat64([]int64{1}, []float64{delta})
	p.feeds[p.inUpTau] = runtime.NewFloat64([]int64{n}, dTauProj)
	p.feeds[p.inUpThr] = runtime.NewFloat64([]int64{1}, []float64{dThreshold})
	outs, err := p.sess.Run(p.feeds...)
	if err != nil {
		return 0, 0, fmt.Errorf("onnxgraph: projector: %w", err)
	}
	copy(tauProj, outs[p.outTau].Float64)
	copy(dTau, outs[p.outGTau].Float64)
	return outs[p.outThr].Float64[0], outs[p.outGDelta].Float64[0], nil
}

// Close releases the session.
func (p *Projector) Close() error { return p.sess.Close() }
