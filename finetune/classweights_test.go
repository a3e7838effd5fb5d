package finetune

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// Reference values: numpy, 1/np.log(1.02 + p).
func TestInverseLogFrequency(t *testing.T) {
	got := InverseLogFrequency([]int64{300, 100, 0})
	want := []float64{1.75137622, 4.18380457, 50.49834979}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-7 {
			t.Errorf("weight %d = %v, want %v", i, got[i], want[i])
		}
	}
}

// --class-weights auto weights the loss by the training masks' own class
// frequencies (counted here from the mask files), says so in the log, and
// trains other weights than the unweighted run; a list of the wrong length
// is refused before training.
func TestClassWeightsAuto(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 1
	plain := filepath.Join(dir, "plain")
	if _, err := Train(context.Background(), cfg, plain, false, Hooks{}); err != nil {
		t.Fatal(err)
	}

	counts := make([]int64, 2)
	masks, _ := filepath.Glob(filepath.Join(cfg.Train.Masks, "*.png"))
	for _, p := range masks {
		m, err := imageio.ReadMask(p, imageio.MaskOptions{NumClasses: 2, Ignore: 255})
		if err != nil {
			t.Fatal(err)
		}
		labels, err := m.Uint8(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range labels {
			counts[l]++
		}
	}
	p := float64(counts[1]) / float64(counts[0]+counts[1])
	want := fmt.Sprintf("class weights (auto: 1/ln(1.02 + p), p each class's share of the training masks' pixels): %.4g, %.4g",
		1/math.Log(1.02+1-p), 1/math.Log(1.02+p))

	weighted := cfg
	weighted.ClassWeights = ClassWeightsAuto
	var log bytes.Buffer
	out := filepath.Join(dir, "auto")
	if _, err := Train(context.Background(), weighted, out, false, Hooks{Log: &log}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), want) {
		t.Errorf("log %q lacks %q", log.String(), want)
	}
	cfgJSON, err := os.ReadFile(filepath.Join(out, ConfigFile))
	if err != nil || !strings.Contains(string(cfgJSON), `"class_weights": "auto"`) {
		t.Errorf("config.json: %s %v", cfgJSON, err)
	}
	a, err := checkpoint.Load(filepath.Join(plain, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Load(filepath.Join(out, "last.ckpt"))
	if err != nil {
		t.Fatal(err)
	}
	same := true
	for i := range a.Weights {
		same = same && slices.Equal(a.Weights[i].Data, b.Weights[i].Data)
	}
	if same {
		t.Error("the weighted run trained the same weights as the unweighted one")
	}

	weighted.ClassWeights = "1,2,3"
	if _, err := Train(context.Background(), weighted, filepath.Join(dir, "three"), false, Hooks{}); err == nil ||
		!strings.Contains(err.Error(), "3 class weights for the training set's 2 classes") {
		t.Errorf("3 weights for 2 classes: %v", err)
	}
	weighted.ClassWeights = "1,x"
	if _, err := Train(context.Background(), weighted, filepath.Join(dir, "bad"), false, Hooks{}); err == nil ||
		!strings.Contains(err.Error(), `"x" is not a number`) {
		t.Errorf("1,x: %v", err)
	}
}
