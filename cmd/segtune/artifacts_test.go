package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/onnxpb"
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
	f := onnxpb.TensorProto_FLOAT
	conv := func(name, x, w, b string) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: proto.String(name), OpType: proto.String("Conv"), Input: []string{x, w, b}, Output: []string{name},
			Attribute: []*onnxpb.AttributeProto{onnx.IntsAttr("pads", 1, 1, 1, 1)}}
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 0.1 * float32(i%7-3)
		}
		return v
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("resize"),
		Node: []*onnxpb.NodeProto{
			conv("c1", "input", "c1.weight", "c1.bias"),
			conv("c2", "c1", "c2.weight", "c2.bias"),
			{Name: proto.String("up"), OpType: proto.String("Resize"), Input: []string{"c2", "", "scales"}, Output: []string{"logits"},
				Attribute: []*onnxpb.AttributeProto{onnx.StringAttr("mode", "linear")}},
		},
		Initializer: []*onnxpb.TensorProto{
			onnx.NewFloat32Tensor("c1.weight", []int64{4, 3, 3, 3}, ones(108)),
			onnx.NewFloat32Tensor("c1.bias", []int64{4}, ones(4)),
			onnx.NewFloat32Tensor("c2.weight", []int64{2, 4, 3, 3}, ones(72)),
			onnx.NewFloat32Tensor("c2.bias", []int64{2}, ones(2)),
			onnx.NewFloat32Tensor("scales", []int64{4}, []float32{1, 1, 2, 2}),
		},
		Input:  []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("input", f, 1, 3, 8, 8)},
		Output: []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("logits", f, 1, 2, 16, 16)},
	}
	if nhwc { // tf2onnx layout: Transposes around the NCHW body
		g.Node[0].Input[0] = "nchw"
		g.Node[2].Output[0] = "logits_nchw"
		g.Node = append([]*onnxpb.NodeProto{{Name: proto.String("to_nchw"), OpType: proto.String("Transpose"), Input: []string{"input"}, Output: []string{"nchw"},
			Attribute: []*onnxpb.AttributeProto{onnx.IntsAttr("perm", 0, 3, 1, 2)}}}, g.Node...)
		g.Node = append(g.Node, &onnxpb.NodeProto{Name: proto.String("to_nhwc"), OpType: proto.String("Transpose"), Input: []string{"logits_nchw"}, Output: []string{"logits"},
			Attribute: []*onnxpb.AttributeProto{onnx.IntsAttr("perm", 0, 2, 3, 1)}})
		g.Input = []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("input", f, 1, 8, 8, 3)}
		g.Output = []*onnxpb.ValueInfoProto{onnx.TensorValueInfo("logits", f, 1, 16, 16, 2)}
	}
	m := &onnx.Model{Proto: &onnxpb.ModelProto{IrVersion: proto.Int64(8), Graph: g,
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(13)}}}}
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
