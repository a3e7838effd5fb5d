package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy/trainingraph"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx/grad"
)

// artifactsCommand compiles a model into training artifacts on disk.
func artifactsCommand() *cli.Command {
	o := &artifactsOptions{}
	return &cli.Command{
		Name:  "artifacts",
		Usage: "compile a model into ONNX training artifacts (training.onnx, eval.onnx, params.onnx, manifest.json)",
		Description: "The training graph uses only default-domain ONNX operators, so any ONNX Runtime\n" +
			"binding runs it on CPU or CUDA. Its inputs are the model's inputs, `target` (int64\n" +
			"class indices, N×H×W), the trainable parameters and any grad_in/<tensor>; its outputs\n" +
			"are `loss`, the model's outputs, any extra outputs and grad/<param> for each trainable\n" +
			"parameter. Shapes, the batch size included, are fixed at build time.",
		Flags:  artifactsFlags(o),
		Action: func(c *cli.Context) error { return runArtifacts(c, o) },
	}
}

// artifactsOptions are what artifacts' flags set: trainingraph's
// Request, its lists, and the output.
type artifactsOptions struct {
	trainingraph.Request
	out                               string
	json                              bool
	trainable, extraOutput, gradInput cli.StringSlice
}

// artifactsFlags bind artifacts' flags into o.
func artifactsFlags(o *artifactsOptions) []cli.Flag {
	o.Batch, o.Size, o.ClassAxis, o.Loss, o.Ignore = 1, "513x513", 1, "ce", grad.DefaultIgnoreIndex
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Required: true, Usage: "inference ONNX model", Destination: &o.Model},
		&cli.StringFlag{Name: "out", Required: true, Usage: "output folder", Destination: &o.out},
		&cli.StringSliceFlag{Name: "trainable", Value: cli.NewStringSlice("all"), Destination: &o.trainable,
			Usage: "parameters to train, as for finetune: " + network.TrainableHelp + "; repeatable"},
		&cli.StringFlag{Name: "size", Value: o.Size, Usage: "training input size HxW", Destination: &o.Size},
		&cli.IntFlag{Name: "batch", Value: o.Batch, Usage: "training batch size (fixed in the graph)", Destination: &o.Batch},
		&cli.StringFlag{Name: "input", Usage: "model input to size (default: the first input)", Destination: &o.Input},
		&cli.StringFlag{Name: "logits", Usage: "tensor holding the logits, an output or e.g. the input of a final Softmax (default: the first output)", Destination: &o.Logits},
		&cli.IntFlag{Name: "class-axis", Value: o.ClassAxis, Usage: "the logits' class axis: 1 for NCHW, -1 for NHWC (default: the contract's)", Destination: &o.ClassAxis},
		&cli.StringFlag{Name: "loss", Value: o.Loss, Usage: "ce (softmax cross entropy) or bce (sigmoid multi-label, no background channel)", Destination: &o.Loss},
		&cli.Int64Flag{Name: "ignore", Aliases: []string{"classes-ignore"}, Value: o.Ignore, Usage: "mask label the loss ignores, as --ignore of the other commands (-1: none)", Destination: &o.Ignore},
		&cli.StringFlag{Name: "class-weights", Usage: "comma-separated per-class loss weights", Destination: &o.ClassWeights},
		&cli.BoolFlag{Name: "loss-scale", Usage: "add the loss_scale input", Destination: &o.LossScale},
		&cli.StringSliceFlag{Name: "extra-output", Usage: "intermediate tensor to expose as an output; repeatable", Destination: &o.extraOutput},
		&cli.StringSliceFlag{Name: "grad-input", Usage: "intermediate tensor receiving an extra upstream gradient (grad_in/<tensor>); repeatable", Destination: &o.gradInput},
		jsonFlag(&o.json),
	}
}

func runArtifacts(c *cli.Context, o *artifactsOptions) error {
	if err := loadRuntime(c, ""); err != nil {
		return err
	}
	o.Trainable, o.ExtraOutputs, o.GradInputs = o.trainable.Value(), o.extraOutput.Value(), o.gradInput.Value()
	o.OnMetadataError = warnMetadata
	compiled, err := o.Compile(given(c))
	if err != nil {
		return err
	}
	if err := grad.WriteArtifacts(o.out, compiled.Graphs); err != nil {
		return err
	}
	if o.json {
		return printJSON(c.App.Writer, compiled.Manifest)
	}
	notef(c, "wrote %s: %s", o.out, compiled.Summary())
	return nil
}
