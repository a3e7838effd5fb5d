package finetune

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// assertExportMatchesTraining checks the exported inference model against
// the forward output of the training graph fed the checkpoint's weights.
func assertExportMatchesTraining(t *testing.T, ckPath string, cfg Config) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "exported.onnx")
	exported, err := export.Export(ckPath, "", out, recordedSettings)
	if err != nil {
		t.Fatal(err)
	}
	reloaded, err := onnx.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Load(ckPath)
	if err != nil {
		t.Fatal(err)
	}
	base, err := cfg.Network.LoadNetwork("")
	if err != nil {
		t.Fatal(err)
	}
	if err := network.SetBatch(base, 1); err != nil {
		t.Fatal(err)
	}
	var pats []string
	for _, w := range ck.Weights {
		if !strings.HasPrefix(w.Name, SizeHeadPrefix) {
			pats = append(pats, "re:"+regexp.QuoteMeta(w.Name))
		}
	}
	h, w := int64(cfg.Height), int64(cfg.Width)
	gs, err := grad.Build(base, grad.Config{Prober: ortprobe.Prober{}, Trainable: pats, InputShapes: map[string][]int64{"input": {1, 3, h, w}}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	img := make([]float32, 3*h*w)
	for i := range img {
		img[i] = rng.Float32()*2 - 1
	}
	train := session(t, gs.Training)
	defer train.Close()
	feeds := make([]*runtime.Tensor, len(train.Inputs))
	weights := map[string]checkpoint.Tensor{}
	for _, x := range ck.Weights {
		weights[x.Name] = x
	}
	for i, in := range train.Inputs {
		switch in.Name {
		case "input":
			feeds[i] = runtime.NewFloat32([]int64{1, 3, h, w}, img)
		case grad.TargetName:
			feeds[i] = runtime.NewInt64([]int64{1, h, w}, make([]int64, h*w))
		default:
			feeds[i] = runtime.NewFloat32(weights[in.Name].Shape, weights[in.Name].Data)
		}
	}
	outs, err := train.Run(feeds...)
	if err != nil {
		t.Fatal(err)
	}
	want := outs[train.OutputIndex(exported.Graph().Output[0].GetName())].Float32
	inf := session(t, reloaded)
	defer inf.Close()
	got, err := inf.Run(runtime.NewFloat32([]int64{1, 3, h, w}, img))
	if err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i := range want {
		worst = math.Max(worst, math.Abs(float64(got[0].Float32[i]-want[i])))
	}
	if worst > 1e-4 {
		t.Fatalf("exported model differs from the training graph's forward output by %g", worst)
	}
	if n := len(reloaded.Graph().Node); n != len(exported.Graph().Node) {
		t.Fatalf("round trip changed the node count")
	}
	if len(reloaded.Graph().Output) != len(base.Graph().Output) {
		t.Fatalf("exported model has %d outputs, the base %d", len(reloaded.Graph().Output), len(base.Graph().Output))
	}
	for _, init := range reloaded.Graph().Initializer {
		if strings.HasPrefix(init.GetName(), SizeHeadPrefix) {
			t.Fatalf("exported model carries %s", init.GetName())
		}
	}
}

func session(t *testing.T, m *onnx.Model) *runtime.Session {
	t.Helper()
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
