package models_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// linearRef computes x·Wᵀ + b in float64 from the model's initializers.
func linearRef(t *testing.T, m *onnx.Model, prefix string, x []float32, n int) []float64 {
	t.Helper()
	w, err := onnx.Float32s(m.Initializer(prefix + ".weight"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := onnx.Float32s(m.Initializer(prefix + ".bias"))
	if err != nil {
		t.Fatal(err)
	}
	k, d := len(b), len(w)/len(b)
	out := make([]float64, n*k)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			s := float64(b[j])
			for f := 0; f < d; f++ {
				s += float64(x[i*d+f]) * float64(w[j*d+f])
			}
			out[i*k+j] = s
		}
	}
	return out
}

func TestLinearClassifierForward(t *testing.T) {
	runtimetest.Require(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, input := range [][]int64{{1, 28, 28}, {784}} {
		m, err := models.LinearClassifier(input, 10, 1, 7)
		if err != nil {
			t.Fatal(err)
		}
		if n := m.Summary().Parameters; n != 784*11+11 {
			t.Errorf("%v: %d parameters, want %d", input, n, 784*11+11)
		}
		s := session(t, m)
		if len(s.Outputs) != 2 || s.Outputs[0].Name != "logits" || s.Outputs[1].Name != models.SMeasureOutput {
			t.Fatalf("%v: outputs %+v", input, s.Outputs)
		}
		shape := append([]int64{3}, input...)
		x := randomFloats(r, numel(shape))
		out, err := s.Run(runtime.NewFloat32(shape, x))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out[0].Shape, []int64{3, 10}) || !slices.Equal(out[1].Shape, []int64{3, 1}) {
			t.Fatalf("%v: output shapes %v and %v, want [3 10] and [3 1]", input, out[0].Shape, out[1].Shape)
		}
		for i, want := range [][]float64{linearRef(t, m, "fc", x, 3), linearRef(t, m, "smeasure", x, 3)} {
			for j, w := range want {
				if math.Abs(float64(out[i].Float32[j])-w) > 1e-4 {
					t.Fatalf("%v: output %d[%d] = %v, want %v", input, i, j, out[i].Float32[j], w)
				}
			}
		}
		_, std := stats(t, "logits", out[0].Float32)
		if !(std > 0.05) {
			t.Errorf("%v: logits standard deviation %.3g: the weights look unset", input, std)
		}
	}
	m, err := models.LinearClassifier([]int64{1, 28, 28}, 10, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(m.Proto.Graph.Output); n != 1 {
		t.Errorf("no extra outputs asked, %d outputs made", n)
	}
	if cls, err := network.Classifier(m); err != nil || cls.Params[0] != "fc.weight" {
		t.Errorf("classifier %v (%v), want fc.weight", cls.Params, err)
	}
}

// The training graph's loss and bias gradient are softmax cross entropy's:
// mean −log p[target] and mean (p − onehot) over the batch.
func TestLinearClassifierTrainingGraph(t *testing.T) {
	runtimetest.Require(t)
	const n, k = 4, 10
	m, err := models.LinearClassifier([]int64{1, 28, 28}, k, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := grad.Build(m, grad.Config{
		Prober:      ortprobe.Prober{},
		Trainable:   []string{"fc.*", "smeasure.*"},
		InputShapes: map[string][]int64{"input": {n, 1, 28, 28}},
		Loss:        grad.Loss{Kind: grad.LossCrossEntropy},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := session(t, gs.Training)
	r := rand.New(rand.NewPCG(9, 9))
	x := randomFloats(r, n*784)
	target := []int64{0, 3, 9, 3}
	feeds := make([]*runtime.Tensor, len(s.Inputs))
	feeds[s.InputIndex("input")] = runtime.NewFloat32([]int64{n, 1, 28, 28}, x)
	feeds[s.InputIndex(grad.TargetName)] = runtime.NewInt64([]int64{n}, target)
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		feeds[s.InputIndex(p.GetName())] = runtime.NewFloat32(p.GetDims(), v)
	}
	outs, err := s.Run(feeds...)
	if err != nil {
		t.Fatal(err)
	}
	logits := linearRef(t, m, "fc", x, n)
	var loss float64
	db := make([]float64, k)
	for i := 0; i < n; i++ {
		row := logits[i*k : (i+1)*k]
		mx := slices.Max(row)
		var z float64
		for _, v := range row {
			z += math.Exp(v - mx)
		}
		loss += (mx + math.Log(z) - row[target[i]]) / n
		for j, v := range row {
			p := math.Exp(v-mx) / z
			if int64(j) == target[i] {
				p--
			}
			db[j] += p / n
		}
	}
	if got := float64(outs[s.OutputIndex(grad.LossName)].Float32[0]); math.Abs(got-loss) > 1e-4 {
		t.Errorf("loss %v, want %v", got, loss)
	}
	gotDB := outs[s.OutputIndex(grad.GradPrefix+"fc.bias")].Float32
	for j := range db {
		if math.Abs(float64(gotDB[j])-db[j]) > 1e-5 {
			t.Errorf("grad fc.bias[%d] = %v, want %v", j, gotDB[j], db[j])
		}
	}
	// The extra output is not in the loss: no gradient reaches it yet (the
	// S-measure term is added through grad_in/s_measure by the caller).
	for _, v := range outs[s.OutputIndex(grad.GradPrefix+"smeasure.weight")].Float32 {
		if v != 0 {
			t.Fatalf("the loss reached smeasure.weight")
		}
	}
	if got := outs[s.OutputIndex(models.SMeasureOutput)].Shape; !slices.Equal(got, []int64{n, 1}) {
		t.Errorf("s_measure %v", got)
	}
}

func TestLinearClassifierErrors(t *testing.T) {
	for _, tc := range []struct {
		input          []int64
		classes, extra int
		want           string
	}{
		{nil, 10, 0, "no input shape"},
		{[]int64{0, 28}, 10, 0, "positive"},
		{[]int64{784}, 0, 0, "at least 1 class"},
		{[]int64{784}, 10, -1, "negative"},
	} {
		if _, err := models.LinearClassifier(tc.input, tc.classes, tc.extra, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, %d, %d: error %v, want one mentioning %q", tc.input, tc.classes, tc.extra, err, tc.want)
		}
	}
}
