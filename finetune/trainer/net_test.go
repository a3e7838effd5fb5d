package trainer

import (
	"errors"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx/autocast"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// logNotices writes each notice's line to w, as a run without a Notice
// hook does.
func logNotices(w io.Writer) func(Notice) {
	return func(n Notice) { io.WriteString(w, n.String()+"\n") }
}

// Graphs for a device that will run on the CPU keep the CPU's Winograd
// form: cpu, and auto where no CUDA provider prepares (this machine's
// CUDA build, if any, finds no GPU in CI).
func TestMayRunOnGPU(t *testing.T) {
	if MayRunOnGPU("cpu") || MayRunOnGPU("") || !MayRunOnGPU("cuda") || !MayRunOnGPU("CUDA") {
		t.Fatal("cpu compiled for the GPU or cuda for the CPU")
	}
	runtimetest.Require(t)
	if _, err := runtime.CUDADevices(); err != nil && MayRunOnGPU("auto") {
		t.Errorf("auto compiled for the GPU where CUDA is unavailable (%v)", err)
	}
}

func TestLossTerms(t *testing.T) {
	for loss, want := range map[string]grad.Loss{
		"": {}, "CE": {}, "focal": {Focal: 2}, "dice": {NoPixel: true, Dice: 1}, "lovasz": {NoPixel: true, Lovasz: 1}, "ce+lovasz": {Lovasz: 1}, "ce+dice": {Dice: 1}, "focal+dice": {Focal: 2, Dice: 1},
	} {
		if got, err := LossTerms(loss, 0); err != nil || got.Focal != want.Focal || got.Dice != want.Dice || got.NoPixel != want.NoPixel || got.Lovasz != want.Lovasz {
			t.Errorf("%q: %+v, %v; want %+v", loss, got, err, want)
		}
	}
	if got, _ := LossTerms("focal", 0.5); got.Focal != 0.5 {
		t.Errorf("focal γ 0.5 read as %v", got.Focal)
	}
}

// Reference: the logits (0, ln 3) give class 1 the probability 3/4.
func TestCrossEntropy(t *testing.T) {
	l3 := float32(math.Log(3))
	scores := []float32{0, l3, 0, l3, 0, 0} // [classes=2, n=3]
	sum, n := crossEntropy(scores, 2, 3, []uint8{1, 0, 255}, 255, contract.Logits)
	want := -math.Log(0.75) - math.Log(0.75)
	if n != 2 || math.Abs(sum-want) > 1e-6 {
		t.Errorf("logits: %v over %d, want %v over 2", sum, n, want)
	}
	probs := []float32{0.25, 0.75, 0.5, 0.75, 0.25, 0.5}
	if sum, _ := crossEntropy(probs, 2, 3, []uint8{1, 0, 255}, 255, contract.Softmax); math.Abs(sum-want) > 1e-6 {
		t.Errorf("probabilities: %v, want %v", sum, want)
	}
}

func TestResidentRejectsBadSetting(t *testing.T) {
	tr := &Net{par: dataparallel.New(nil)}
	if _, err := tr.residentState("maybe", ""); err == nil {
		t.Error(`--resident "maybe" was accepted`)
	}
	for setting, want := range map[string]bool{"on": true, "off": false, "auto": false, "": false} {
		got, err := tr.residentState(setting, "cpu")
		if err != nil || got != want {
			t.Errorf("--resident %q on the CPU: %v, %v; want %v", setting, got, err, want)
		}
	}
}

func TestLossScalerPolicy(t *testing.T) {
	const initialLossScale = 1 << 16
	l := &LossScaler{Scale: initialLossScale}
	l.overflowed()
	if l.Scale != initialLossScale/2 || l.Clean != 0 {
		t.Fatalf("after an overflow: %+v", *l)
	}
	for range lossScaleGrowthEvery - 1 {
		l.clean()
	}
	if l.Scale != initialLossScale/2 {
		t.Fatalf("grew before %d clean steps: %+v", lossScaleGrowthEvery, *l)
	}
	l.clean()
	if l.Scale != initialLossScale || l.Clean != 0 {
		t.Fatalf("after %d clean steps: %+v", lossScaleGrowthEvery, *l)
	}
	for range 100 {
		l.overflowed()
	}
	if l.Scale != minLossScale {
		t.Fatalf("scale fell to %v, below its floor %v", l.Scale, minLossScale)
	}
}

func TestPrecisionSetting(t *testing.T) {
	var log strings.Builder
	tr := &Net{par: dataparallel.New(nil), notice: logNotices(&log)}
	for setting, want := range map[string]Precision{
		"": {}, "fp32": {}, "TF32": {}, "fp16": {Half: true, Type: autocast.Float16},
	} {
		if got, err := tr.precision(setting, ""); err != nil || got != want {
			t.Errorf("--precision %q: %v, %v", setting, got, err)
		}
	}
	if _, err := tr.precision("int8", ""); err == nil {
		t.Error("--precision int8 was accepted")
	}
	// bfloat16 needs the CUDA provider: refused on an explicit CPU,
	// float32 with one line where auto finds no GPU.
	if _, err := tr.precision("bf16", "cpu"); err == nil || !strings.Contains(err.Error(), "CUDA") {
		t.Errorf("--precision bf16 --device cpu: %v", err)
	}
	if _, err := runtime.CUDADevices(); err == nil {
		t.Skip("this machine has a CUDA GPU: bf16 with --device auto stays bf16")
	}
	log.Reset()
	if got, err := tr.precision("bf16", "auto"); err != nil || got.Half {
		t.Errorf("--precision bf16 --device auto without a GPU: %v, %v", got, err)
	}
	if l := log.String(); strings.Count(l, "\n") != 1 || !strings.Contains(l, "float32") || strings.Contains(l, "--") {
		t.Errorf("bf16 fallback line %q", l)
	}
}

// TestResidentAutoFallsBack: where auto chose the device form and it does
// not open, the run goes on in the host form with one line saying why;
// --resident on fails instead, and a host-form failure is not retried.
func TestResidentAutoFallsBack(t *testing.T) {
	refuse := errors.New("CopyTensors: no data transfer\nsecond line")
	var log strings.Builder
	var tried []bool
	open := func(res bool) (*stepper, error) {
		tried = append(tried, res)
		if res {
			return nil, refuse
		}
		return &stepper{}, nil
	}
	s, err := openStepper(logNotices(&log), "auto", true, open)
	if err != nil || s == nil || !slices.Equal(tried, []bool{true, false}) {
		t.Fatalf("auto: %v, tried %v", err, tried)
	}
	if got := log.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "no data transfer") || !strings.Contains(got, "host memory") ||
		!strings.Contains(got, "resident auto: ") || strings.Contains(got, "--") {
		t.Errorf("fallback line %q", got)
	}
	tried, log = nil, strings.Builder{}
	if _, err := openStepper(logNotices(&log), "on", true, open); !errors.Is(err, refuse) || len(tried) != 1 || log.Len() != 0 {
		t.Errorf("--resident on: %v after %v tries, log %q", err, tried, log.String())
	}
	tried = nil
	failHost := func(res bool) (*stepper, error) { tried = append(tried, res); return nil, refuse }
	if _, err := openStepper(logNotices(&log), "auto", false, failHost); !errors.Is(err, refuse) || len(tried) != 1 {
		t.Errorf("host form: %v after %v tries", err, tried)
	}
}

// TestCUDAOptionsByPrecision: the options a training session gets on a
// GPU: TF32 but under fp32, cuDNN's heuristic search under fp16 and bf16
// (its exhaustive search re-ran every step there), and CUDAOptions over
// both.
func TestCUDAOptionsByPrecision(t *testing.T) {
	for _, c := range []struct {
		precision string
		own       map[string]string
		want      map[string]string
	}{
		{"fp32", nil, map[string]string{"use_tf32": "0"}},
		{"tf32", nil, map[string]string{"use_tf32": "1"}},
		{"fp16", nil, map[string]string{"use_tf32": "1", runtime.CUDAConvSearch: "HEURISTIC"}},
		{"BF16", nil, map[string]string{"use_tf32": "1", runtime.CUDAConvSearch: "HEURISTIC"}},
		{"fp16", map[string]string{runtime.CUDAConvSearch: "EXHAUSTIVE"}, map[string]string{"use_tf32": "1", runtime.CUDAConvSearch: "EXHAUSTIVE"}},
		{"fp32", map[string]string{"use_tf32": "1", "prefer_nhwc": "1"}, map[string]string{"use_tf32": "1", "prefer_nhwc": "1"}},
	} {
		own := maps.Clone(c.own)
		if got := CUDAOptions(c.precision, c.own); !maps.Equal(got, c.want) {
			t.Errorf("precision %s, CUDAOptions %v: %v, want %v", c.precision, c.own, got, c.want)
		}
		if !maps.Equal(own, c.own) {
			t.Errorf("precision %s: CUDAOptions changed to %v", c.precision, c.own)
		}
	}
}
