package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/testassets"
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
