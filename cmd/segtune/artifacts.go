package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy/trainingraph"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx/grad"
)

// artifactsCommand compiles a model into training artifacts on disk.
func artifactsCommand() *cli.Command {
	return &cli.Command{
		Name:  "artifacts",
		Usage: "compile a model into ONNX training artifacts (training.onnx, eval.onnx, params.onnx, manifest.json)",
		Description: "The training graph uses only default-domain ONNX operators, so any ONNX Runtime\n" +
			"binding runs it on CPU or CUDA. Its inputs are the model's inputs, `target` (int64\n" +
			"class indices, N×H×W), the trainable parameters and any grad_in/<tensor>; its outputs\n" +
			"are `loss`, the model's outputs, any extra outputs and grad/<param> for each trainable\n" +
			"parameter. Shapes, the batch size included, are fixed at build time.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "inference ONNX model"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "output folder"},
			&cli.StringSliceFlag{Name: "trainable", Value: cli.NewStringSlice("all"),
				Usage: "parameters to train, as for finetune: " + network.TrainableHelp + "; repeatable"},
			&cli.StringFlag{Name: "size", Value: "513x513", Usage: "training input size HxW"},
			&cli.IntFlag{Name: "batch", Value: 1, Usage: "training batch size (fixed in the graph)"},
			&cli.StringFlag{Name: "input", Usage: "model input to size (default: the first input)"},
			&cli.StringFlag{Name: "logits", Usage: "tensor holding the logits, an output or e.g. the input of a final Softmax (default: the first output)"},
			&cli.IntFlag{Name: "class-axis", Value: 1, Usage: "the logits' class axis: 1 for NCHW, -1 for NHWC (default: the contract's)"},
			&cli.StringFlag{Name: "loss", Value: "ce", Usage: "ce (softmax cross entropy) or bce (sigmoid multi-label, no background channel)"},
			&cli.Int64Flag{Name: "ignore", Aliases: []string{"classes-ignore"}, Value: grad.DefaultIgnoreIndex, Usage: "mask label the loss ignores, as --ignore of the other commands (-1: none)"},
			&cli.StringFlag{Name: "class-weights", Usage: "comma-separated per-class loss weights"},
			&cli.BoolFlag{Name: "loss-scale", Usage: "add the loss_scale input"},
			&cli.StringSliceFlag{Name: "extra-output", Usage: "intermediate tensor to expose as an output; repeatable"},
			&cli.StringSliceFlag{Name: "grad-input", Usage: "intermediate tensor receiving an extra upstream gradient (grad_in/<tensor>); repeatable"},
			jsonFlag(new(bool)),
		},
		Action: runArtifacts,
	}
}

func runArtifacts(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	h, w, err := trainingraph.ParseSize(c.String("size"))
	if err != nil {
		return cli.Exit("--size: "+err.Error(), 2)
	}
	loss := grad.Loss{Output: c.String("logits"), ClassAxis: c.Int("class-axis"), Scale: c.Bool("loss-scale")}
	if loss.Kind, err = trainingraph.ParseLoss(c.String("loss")); err != nil {
		return cli.Exit("--loss "+err.Error(), 2)
	}
	if ign := c.Int64("ignore"); ign < 0 {
		loss.NoIgnore = true
	} else {
		loss.IgnoreIndex = &ign
	}
	if s := c.String("class-weights"); s != "" {
		if loss.ClassWeights, err = grad.ParseClassWeights(s); err != nil {
			return cli.Exit(fmt.Sprintf("--class-weights: %v", err), 2)
		}
	}
	compiled, err := trainingraph.Compile(trainingraph.Spec{
		Model: c.String("model"), Trainable: c.StringSlice("trainable"), Batch: c.Int("batch"), Height: h, Width: w,
		Input: c.String("input"), Loss: loss, ExtraOutputs: c.StringSlice("extra-output"), GradInputs: c.StringSlice("grad-input"),
		Given:   finetune.Given{Size: c.IsSet("size"), Output: c.IsSet("logits"), ClassAxis: c.IsSet("class-axis"), Kind: c.IsSet("loss")},
		Threads: c.Int("threads"), OnMetadataError: warnMetadata,
	})
	var se *trainingraph.SpecError
	switch {
	case errors.As(err, &se) && se.Field == "Trainable":
		return cli.Exit("--trainable: "+se.Err.Error(), 2)
	case errors.As(err, &se) && se.Field == "Contract":
		return cli.Exit(fmt.Sprintf("%v (name the image input with --input for other models)", se.Err), 2)
	case errors.As(err, &se):
		return cli.Exit(se.Err.Error(), 2)
	case err != nil:
		return err
	}
	if err := grad.WriteArtifacts(c.String("out"), compiled.Graphs); err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, compiled.Manifest)
	}
	notef(c, "wrote %s: %s", c.String("out"), compiled.Summary())
	return nil
}
