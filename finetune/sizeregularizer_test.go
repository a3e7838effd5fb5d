package finetune

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func regularizedToy(t *testing.T, dir, projection string) Config {
	cfg := toyConfig(t, dir)
	cfg.Balanced = true
	cfg.Regularizer = &RegularizerConfig{Alpha: 1e-2, Projection: projection, ScoreBound: 1,
		Dual: dual.Config{CLambda: 1, Normalization: dual.NormMean}}
	return cfg
}

func TestRegularizedRunLogsAndExportsWithoutHead(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "epoch")
	out := filepath.Join(dir, "run")
	var last EpochInfo
	if _, err := Train(context.Background(), cfg, out, false, Hooks{OnEpoch: func(e EpochInfo) { last = e }}); err != nil {
		t.Fatal(err)
	}
	recs, err := history.Read(filepath.Join(out, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	epochs := history.Filter(recs, history.KindEpoch)
	for _, key := range []string{"reg_lagrangian", "reg_violation", "reg_projections", "size_f1_train", "size_f1_val", "val_miou_small", "val_miou_large", "val_miou_gap",
		"reg_dual_steps", "reg_lambda_mean", "reg_lambda_max", "reg_tau_sum", "reg_eps_before", "reg_eps_after", "reg_hinge_active"} {
		if _, ok := epochs[len(epochs)-1].Value(key); !ok {
			t.Errorf("epoch record lacks %s: %+v", key, epochs[len(epochs)-1])
		}
	}
	// Algorithm 1: one projection per epoch.
	if p, _ := epochs[0].Value("reg_projections"); p != 1 {
		t.Errorf("epoch schedule made %v projections in an epoch, want 1", p)
	}
	// Three steps an epoch: the default of four dual steps an epoch is one
	// after each step (K = 1), the last at the epoch's end.
	if d, _ := epochs[0].Value("reg_dual_steps"); d != 3 {
		t.Errorf("%v dual steps in an epoch of 3 steps, want 3", d)
	}
	if l, _ := epochs[len(epochs)-1].Value("reg_lambda_max"); !(l > 0) {
		t.Errorf("λ max %v after %d epochs: the dual steps did not move λ", l, len(epochs))
	}
	for _, e := range epochs {
		if v, _ := e.Value("reg_eps_before"); v < 0 {
			t.Errorf("epoch %d: ε = %v < 0 before the projection, with feasibility batch", e.Epoch, v)
		}
	}
	// The size head stays in the box of the score bound: |w_k| ≤ 1/C, |b| ≤ 1.
	ck, err := checkpoint.Load(filepath.Join(out, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ck.Weights {
		box := float32(1)
		switch w.Name {
		case sizehead.Weight:
			box /= float32(w.Shape[0])
		case sizehead.Bias:
		default:
			continue
		}
		atBox := 0
		for _, v := range w.Data {
			if v > box || v < -box {
				t.Fatalf("%s holds %v outside the box ±%v", w.Name, v, box)
			}
			if v == box || v == -box {
				atBox++
			}
		}
		t.Logf("%s: %d of %d values on the box ±%v", w.Name, atBox, len(w.Data), box)
	}
	if len(last.Groups) != 2 {
		t.Errorf("groups %v, want small and large", last.Groups)
	}
	assertExportMatchesTraining(t, filepath.Join(out, "last.ckpt"), cfg)
}

// The full-projections baseline projects after every step.
func TestStepProjectionSchedule(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "step")
	cfg.Epochs = 2
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	recs, _ := history.Read(filepath.Join(out, HistoryFile))
	e := history.Filter(recs, history.KindEpoch)[0]
	if p, _ := e.Value("reg_projections"); p != 3 { // 12 examples / batch 4
		t.Errorf("step schedule made %v projections in an epoch of 3 steps", p)
	}
}

// Training through the in-graph projection: two ONNX projections per step
// (one for the gradient, one for the new point) and none at the epoch's end.
func TestGraphProjectionSchedule(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "graph")
	cfg.Epochs = 2
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	recs, _ := history.Read(filepath.Join(out, HistoryFile))
	for i, e := range history.Filter(recs, history.KindEpoch) {
		if p, _ := e.Value("reg_projections"); p != 6 { // 12 examples / batch 4, two each
			t.Errorf("epoch %d: graph schedule made %v projections in 3 steps, want 6", i+1, p)
		}
		if v, ok := e.Value("reg_violation"); !ok || v != v {
			t.Errorf("epoch %d: no constraint violation logged", i+1)
		}
	}
	ck, err := checkpoint.Load(filepath.Join(out, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ck.RegularizerState, []byte(`"raw_tau"`)) {
		t.Error("the checkpoint lacks the free variables τ̃ of the graph schedule")
	}
}

// Resuming restores the regularizer's τ, λ, ε, μ and score cache too, and
// under the graph schedule its free variables.
func TestRegularizedResumeIsExact(t *testing.T) {
	runtimetest.Require(t)
	for _, schedule := range []string{"epoch", "graph"} {
		t.Run(schedule, func(t *testing.T) {
			dir := t.TempDir()
			assertResumeIsExact(t, dir, regularizedToy(t, dir, schedule))
		})
	}
}

// Balanced batches without the regularizer: the like-for-like baseline.
func TestBalancedBaseline(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Balanced, cfg.Epochs = true, 2
	var ids [][]int
	order := balancedOrder([]int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, 3, 4, 3)
	for e := 0; e < 2; e++ {
		o := order(e)
		if len(o) != 12 {
			t.Fatalf("epoch %d: %d ids, want 3 batches of 4", e, len(o))
		}
		for b := 0; b < 3; b++ {
			large := 0
			for _, id := range o[4*b : 4*b+4] {
				if id >= 8 {
					large++
				}
			}
			if large != 2 {
				t.Errorf("epoch %d batch %d has %d large examples, want 2", e, b, large)
			}
		}
		ids = append(ids, o)
	}
	if slices.Equal(ids[0], ids[1]) {
		t.Error("two epochs drew the same order")
	}
	if _, err := Train(context.Background(), cfg, filepath.Join(dir, "run"), false, Hooks{}); err != nil {
		t.Fatal(err)
	}
}

// Interrupted in the middle of an epoch, between two of its dual steps,
// a regularised run resumes into the uninterrupted run's weights and dual
// state: the resumed Loop knows the epoch and step it starts at.
func TestRegularizedInterruptMidEpochResumes(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := regularizedToy(t, dir, "epoch")
	cfg.Regularizer.Dual.DualEvery = 2
	cfg.Epochs = 3
	full := filepath.Join(dir, "full")
	if _, err := Train(context.Background(), cfg, full, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(dir, "part")
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Train(ctx, cfg, part, false, Hooks{OnStep: func(s StepInfo) {
		if s.Step == 5 { // epoch 2, step 2 of 3: after its mid-epoch dual step
			cancel()
		}
	}})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("err = %v, want ErrInterrupted", err)
	}
	if _, err := Train(context.Background(), cfg, part, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	assertSameWeights(t, filepath.Join(full, "last.ckpt"), filepath.Join(part, "last.ckpt"))
	a, err := checkpoint.Load(filepath.Join(full, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Load(filepath.Join(part, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.RegularizerState, b.RegularizerState) {
		t.Fatal("the resumed run's dual state differs from the uninterrupted one's")
	}
}

// With a score bound the head reads the pooled features divided by their
// mean absolute value: s = W·a/(mean|a| + 1e-6) + b, so inside the box
// |s| ≤ 2·bound whatever the features' scale.
func TestBoundedSizeHead(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	m, err := onnx.Load(toyModel(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	const C = 8
	w := &optim.Param{Name: sizehead.Weight, Shape: []int64{C, 1}, Data: []float32{0.125, -0.125, 0.1, 0, 0.125, 0.125, -0.05, 0.125}}
	b := &optim.Param{Name: sizehead.Bias, Shape: []int64{1}, Data: []float32{0.3}}
	if err := sizehead.Append(m, "", 1, []*optim.Param{w, b}); err != nil {
		t.Fatal(err)
	}
	g := m.Graph()
	g.Output = append(g.Output, &onnx.ValueInfoProto{Name: proto.String("segtune/size_features")})
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sess, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []float32{1e-3, 1, 1e3} {
		x := make([]float32, 2*3*6*5)
		for i := range x {
			x[i] = scale * float32(rng.NormFloat64())
		}
		outs, err := sess.Run(runtime.NewFloat32([]int64{2, 3, 6, 5}, x))
		if err != nil {
			t.Fatal(err)
		}
		scores, feats := outs[sess.OutputIndex(sizehead.Scores)].Float32, outs[sess.OutputIndex("segtune/size_features")].Float32
		for n := range 2 {
			a := feats[n*C : (n+1)*C]
			mean := 0.0
			for _, v := range a {
				mean += math.Abs(float64(v)) / C
			}
			want := float64(b.Data[0])
			for k, v := range a {
				want += float64(w.Data[k]) * float64(v) / (mean + 1e-6)
			}
			if got := float64(scores[n]); math.Abs(got-want) > 1e-5*(1+math.Abs(want)) || math.Abs(got) > 2 {
				t.Errorf("scale %g, image %d: score %v, want %v (and |s| ≤ 2)", scale, n, got, want)
			}
		}
	}
}

// The default regularizer is one the dual optimiser accepts, and it
// weighs what it is given.
func TestDefaultRegularizerIsAccepted(t *testing.T) {
	r := DefaultRegularizer(0.25)
	if r.Alpha != 0.25 || r.Projection != "epoch" || r.Dual.Objective != "fbeta" || r.Dual.Beta != 1 {
		t.Fatalf("DefaultRegularizer(0.25) = %+v", r)
	}
	if _, err := dual.New(r.Dual, []int64{0, 1, 2}, []int{0, 1, 1}); err != nil {
		t.Fatalf("dual.New refuses the default: %v", err)
	}
	if b, w := AlphaDefaults(0); b || w {
		t.Errorf("AlphaDefaults(0) = %v, %v; want plain crops without a regularizer", b, w)
	}
	if b, w := AlphaDefaults(0.1); !b || !w {
		t.Errorf("AlphaDefaults(0.1) = %v, %v; want balanced whole frames", b, w)
	}
}
