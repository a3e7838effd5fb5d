package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy/trainingraph"
	"github.com/segtune/segtune/finetune/trainer"
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

// artifactsOptions are what artifacts' flags set: trainingraph's Spec and
// the loss, as text the action parses, and the output.
type artifactsOptions struct {
	spec                                  trainingraph.Spec
	out, size, logits, loss, classWeights string
	classAxis                             int
	ignore                                int64
	lossScale, json                       bool
	trainable, extraOutput, gradInput     cli.StringSlice
}

// artifactsFlags bind artifacts' flags into o.
func artifactsFlags(o *artifactsOptions) []cli.Flag {
	o.spec.Batch, o.size, o.classAxis, o.loss, o.ignore = 1, "513x513", 1, "ce", grad.DefaultIgnoreIndex
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Required: true, Usage: "inference ONNX model", Destination: &o.spec.Model},
		&cli.StringFlag{Name: "out", Required: true, Usage: "output folder", Destination: &o.out},
		&cli.StringSliceFlag{Name: "trainable", Value: cli.NewStringSlice("all"), Destination: &o.trainable,
			Usage: "parameters to train, as for finetune: " + network.TrainableHelp + "; repeatable"},
		&cli.StringFlag{Name: "size", Value: o.size, Usage: "training input size HxW", Destination: &o.size},
		&cli.IntFlag{Name: "batch", Value: o.spec.Batch, Usage: "training batch size (fixed in the graph)", Destination: &o.spec.Batch},
		&cli.StringFlag{Name: "input", Usage: "model input to size (default: the first input)", Destination: &o.spec.Input},
		&cli.StringFlag{Name: "logits", Usage: "tensor holding the logits, an output or e.g. the input of a final Softmax (default: the first output)", Destination: &o.logits},
		&cli.IntFlag{Name: "class-axis", Value: o.classAxis, Usage: "the logits' class axis: 1 for NCHW, -1 for NHWC (default: the contract's)", Destination: &o.classAxis},
		&cli.StringFlag{Name: "loss", Value: o.loss, Usage: "ce (softmax cross entropy) or bce (sigmoid multi-label, no background channel)", Destination: &o.loss},
		&cli.Int64Flag{Name: "ignore", Aliases: []string{"classes-ignore"}, Value: o.ignore, Usage: "mask label the loss ignores, as --ignore of the other commands (-1: none)", Destination: &o.ignore},
		&cli.StringFlag{Name: "class-weights", Usage: "comma-separated per-class loss weights", Destination: &o.classWeights},
		&cli.BoolFlag{Name: "loss-scale", Usage: "add the loss_scale input", Destination: &o.lossScale},
		&cli.StringSliceFlag{Name: "extra-output", Usage: "intermediate tensor to expose as an output; repeatable", Destination: &o.extraOutput},
		&cli.StringSliceFlag{Name: "grad-input", Usage: "intermediate tensor receiving an extra upstream gradient (grad_in/<tensor>); repeatable", Destination: &o.gradInput},
		jsonFlag(&o.json),
	}
}

func runArtifacts(c *cli.Context, o *artifactsOptions) error {
	if err := loadRuntime(c, ""); err != nil {
		return err
	}
	spec, err := artifactsSpec(c, o)
	if err != nil {
		return err
	}
	compiled, err := trainingraph.Compile(spec)
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
	if err := grad.WriteArtifacts(o.out, compiled.Graphs); err != nil {
		return err
	}
	if o.json {
		return printJSON(c.App.Writer, compiled.Manifest)
	}
	notef(c, "wrote %s: %s", o.out, compiled.Summary())
	return nil
}

// artifactsSpec is the compilation o describes: its size and loss parsed.
func artifactsSpec(c *cli.Context, o *artifactsOptions) (trainingraph.Spec, error) {
	s := o.spec
	var err error
	if s.Height, s.Width, err = trainingraph.ParseSize(o.size); err != nil {
		return s, cli.Exit("--size: "+err.Error(), 2)
	}
	s.Loss = grad.Loss{Output: o.logits, ClassAxis: o.classAxis, Scale: o.lossScale}
	if s.Loss.Kind, err = trainingraph.ParseLoss(o.loss); err != nil {
		return s, cli.Exit("--loss "+err.Error(), 2)
	}
	if ign := o.ignore; ign < 0 {
		s.Loss.NoIgnore = true
	} else {
		s.Loss.IgnoreIndex = &ign
	}
	if o.classWeights != "" {
		if s.Loss.ClassWeights, err = grad.ParseClassWeights(o.classWeights); err != nil {
			return s, cli.Exit(fmt.Sprintf("--class-weights: %v", err), 2)
		}
	}
	s.Trainable, s.ExtraOutputs, s.GradInputs = o.trainable.Value(), o.extraOutput.Value(), o.gradInput.Value()
	s.Given = trainer.Given{Size: c.IsSet("size"), Output: c.IsSet("logits"), ClassAxis: c.IsSet("class-axis"), Kind: c.IsSet("loss")}
	s.OnMetadataError = warnMetadata
	return s, nil
}
