package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

func TestArtifactsCommand(t *testing.T) {
	model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	out := t.TempDir()
	app := &cli.App{
		Flags:          []cli.Flag{&cli.StringFlag{Name: "ort-lib"}, &cli.BoolFlag{Name: "quiet"}},
		Commands:       []*cli.Command{artifactsCommand()},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	err := app.Run([]string{"segtune", "--quiet", "artifacts", "--model", model, "--out", out,
		"--trainable", "decoder_*", "--trainable", "re:logits_.*", "--size", "33x41", "--batch", "1",
		"--extra-output", "decoder_decoder_conv1_decoder_conv1_pointwise_Relu_act_225"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{grad.TrainingFile, grad.EvalFile, grad.ParamsFile, grad.ManifestFile} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	var man grad.Manifest
	data, err := os.ReadFile(filepath.Join(out, grad.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	if len(man.Params) == 0 || man.Loss != grad.LossName || man.Training.Inputs[0].Shape[2] != 33 {
		t.Errorf("unexpected manifest: %+v", man)
	}
	params, err := grad.LoadParams(filepath.Join(out, grad.ParamsFile))
	if err != nil || len(params) != len(man.Params) {
		t.Errorf("params file: %d tensors, %v", len(params), err)
	}
}

// resizeModel is input [1,3,H,W] → Conv → Conv → Resize(×2, float scales
// initializer) → logits: "*" or "all" must train the convolutions only,
// never the Resize scales.
func resizeModel(t *testing.T, nhwc bool) string {
	t.Helper()
	f := onnx.Float32
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 0.1 * float32(i%7-3)
		}
		return v
	}
	b := &onnx.Builder{}
	param := func(name string, dims ...int64) string {
		n, _ := onnx.NumElements(dims)
		return b.Initializer(onnx.NewFloat32Tensor(name, dims, ones(int(n))))
	}
	conv := func(name, x string, cout, cin int64) string {
		w, bias := param(name+".weight", cout, cin, 3, 3), param(name+".bias", cout)
		return b.Node("Conv", name, []string{x, w, bias}, onnx.IntsAttr("pads", 1, 1, 1, 1))
	}
	in, out := onnx.TensorValueInfo("input", f, 1, 3, 8, 8), onnx.TensorValueInfo("logits", f, 1, 2, 16, 16)
	x, logits := "input", "logits"
	if nhwc { // tf2onnx layout: Transposes around the NCHW body
		in, out = onnx.TensorValueInfo("input", f, 1, 8, 8, 3), onnx.TensorValueInfo("logits", f, 1, 16, 16, 2)
		x, logits = "nchw", "logits_nchw"
		b.Emit("Transpose", "to_nchw", []string{"input"}, []string{x}, onnx.IntsAttr("perm", 0, 3, 1, 2))
	}
	c2 := conv("c2", conv("c1", x, 4, 3), 2, 4)
	scales := b.ConstFloat("scales", f, []int64{4}, 1, 1, 2, 2)
	b.Emit("Resize", "up", []string{c2, "", scales}, []string{logits}, onnx.StringAttr("mode", "linear"))
	if nhwc {
		b.Emit("Transpose", "to_nhwc", []string{logits}, []string{"logits"}, onnx.IntsAttr("perm", 0, 2, 3, 1))
	}
	m := onnx.NewModel(b.Graph("resize", []*onnx.ValueInfoProto{in}, []*onnx.ValueInfoProto{out}), 13)
	path := filepath.Join(t.TempDir(), "resize.onnx")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestArtifactsTrainablePresets: --trainable takes finetune's presets and
// patterns, and the default works on a model with Resize scales.
func TestArtifactsTrainablePresets(t *testing.T) {
	model := resizeModel(t, false)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"c1.weight", "c1.bias", "c2.weight", "c2.bias"}},
		{[]string{"--trainable", "*"}, []string{"c1.weight", "c1.bias", "c2.weight", "c2.bias"}},
		{[]string{"--trainable", "classifier"}, []string{"c2.weight", "c2.bias"}},
		{[]string{"--trainable", "last:1", "--trainable", "c1.bias"}, []string{"c2.weight", "c2.bias", "c1.bias"}},
		{[]string{"--trainable", "skip:1", "--loss", "bce"}, []string{"c2.weight", "c2.bias"}},
	} {
		out := t.TempDir()
		app := &cli.App{
			Flags:          []cli.Flag{&cli.StringFlag{Name: "ort-lib"}, &cli.BoolFlag{Name: "quiet"}},
			Commands:       []*cli.Command{artifactsCommand()},
			ExitErrHandler: func(*cli.Context, error) {},
		}
		args := append([]string{"segtune", "--quiet", "artifacts", "--model", model, "--out", out, "--size", "8x8"}, tc.args...)
		if err := app.Run(args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var man grad.Manifest
		data, err := os.ReadFile(filepath.Join(out, grad.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &man); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range man.Params {
			got = append(got, p.Name)
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: trains %v, want %v", tc.args, got, tc.want)
		}
	}
}

// TestArtifactsNHWC: an NHWC model (tf2onnx layout) is sized NHWC and
// trained with --class-axis -1.
func TestArtifactsNHWC(t *testing.T) {
	model := resizeModel(t, true)
	out := t.TempDir()
	app := &cli.App{
		Flags:          []cli.Flag{&cli.StringFlag{Name: "ort-lib"}, &cli.BoolFlag{Name: "quiet"}},
		Commands:       []*cli.Command{artifactsCommand()},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if err := app.Run([]string{"segtune", "--quiet", "artifacts", "--model", model, "--out", out, "--size", "8x8", "--class-axis", "-1"}); err != nil {
		t.Fatal(err)
	}
	var man grad.Manifest
	data, err := os.ReadFile(filepath.Join(out, grad.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &man); err != nil {
		t.Fatal(err)
	}
	if in := man.Training.Inputs; !slices.Equal(in[0].Shape, []int64{1, 8, 8, 3}) || !slices.Equal(in[1].Shape, []int64{1, 16, 16}) {
		t.Errorf("inputs %+v, want input [1 8 8 3] and target [1 16 16]", in)
	}
	if man.ClassAxis != 3 || man.Classes != 2 || len(man.Params) != 4 {
		t.Errorf("class axis %d, %d classes, %d parameters; want 3, 2, 4", man.ClassAxis, man.Classes, len(man.Params))
	}
}
