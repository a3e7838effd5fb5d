package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/ortprobe"
	"github.com/segtune/segtune/resolve"
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
			&cli.Int64Flag{Name: "classes-ignore", Value: grad.DefaultIgnoreIndex, Usage: "target value the loss ignores (-1: none)"},
			&cli.StringFlag{Name: "class-weights", Usage: "comma-separated per-class loss weights"},
			&cli.BoolFlag{Name: "loss-scale", Usage: "add the loss_scale input"},
			&cli.StringSliceFlag{Name: "extra-output", Usage: "intermediate tensor to expose as an output; repeatable"},
			&cli.StringSliceFlag{Name: "grad-input", Usage: "intermediate tensor receiving an extra upstream gradient (grad_in/<tensor>); repeatable"},
			jsonFlag,
		},
		Action: runArtifacts,
	}
}

func runArtifacts(c *cli.Context) error {
	if err := initRuntime(c); err != nil {
		return err
	}
	h, w, err := parseTrainSize(c.String("size"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	batch := c.Int("batch")
	if batch <= 0 {
		return cli.Exit("--batch must be positive", 2)
	}
	m, err := onnx.Load(c.String("model"))
	if err != nil {
		return err
	}
	loss := grad.Loss{Output: c.String("logits"), ClassAxis: c.Int("class-axis"), Scale: c.Bool("loss-scale")}
	switch c.String("loss") {
	case "ce":
	case "bce":
		loss.Kind = grad.LossSigmoidBCE
	default:
		return cli.Exit(fmt.Sprintf("--loss %q: want ce or bce", c.String("loss")), 2)
	}
	in, err := artifactsInput(c, m, batch, h, w, &loss)
	if err != nil {
		return err
	}
	trainable, err := finetune.TrainablePatterns(m, c.StringSlice("trainable")...)
	if err != nil {
		return cli.Exit("--trainable: "+err.Error(), 2)
	}
	if ign := c.Int64("classes-ignore"); ign < 0 {
		loss.NoIgnore = true
	} else {
		loss.IgnoreIndex = &ign
	}
	if s := c.String("class-weights"); s != "" {
		if loss.ClassWeights, err = grad.ParseClassWeights(s); err != nil {
			return cli.Exit(fmt.Sprintf("--class-weights: %v", err), 2)
		}
	}
	cfg := grad.Config{
		Prober:       ortprobe.Prober{Threads: c.Int("threads")},
		Trainable:    trainable,
		InputShapes:  map[string][]int64{in.Name: in.Shape},
		Loss:         loss,
		ExtraOutputs: c.StringSlice("extra-output"),
		GradInputs:   c.StringSlice("grad-input"),
	}
	gs, err := grad.Build(m, cfg)
	if err != nil {
		return err
	}
	if err := grad.WriteArtifacts(c.String("out"), gs); err != nil {
		return err
	}
	if c.Bool("json") {
		return printJSON(c.App.Writer, gs.Manifest)
	}
	var values int64
	for _, p := range gs.Params {
		if n, err := onnx.NumElements(p.GetDims()); err == nil {
			values += n
		}
	}
	notef(c, "wrote %s: %d trainable parameter tensors (%d values), %d training nodes, batch %d at %dx%d",
		c.String("out"), len(gs.Params), values, len(gs.Training.Proto.Graph.Node), batch, in.Height, in.Width)
	return nil
}

// parseTrainSize reads "HxW" (or a single number for a square).
func parseTrainSize(s string) (int64, int64, error) {
	parts := strings.Split(strings.ToLower(s), "x")
	if len(parts) == 1 {
		parts = append(parts, parts[0])
	}
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("--size %q: want HxW", s)
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	w, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || h <= 0 || w <= 0 || h > 1<<15 || w > 1<<15 {
		return 0, 0, fmt.Errorf("--size %q: want HxW with positive sizes", s)
	}
	return h, w, nil
}

// artifactsInput returns the image input the training graph is compiled
// for, at batch and h×w: --input's, or, for a segmentation model, its
// contract's, which also sets the loss's output, class axis and kind
// unless flags say otherwise, and the model's fixed size unless --size is
// given. The model's settings (sidecar, metadata_props, registry) say the
// layouts and a sigmoid head's threshold where the graph cannot.
func artifactsInput(c *cli.Context, m *onnx.Model, batch int, h, w int64, loss *grad.Loss) (finetune.TrainInput, error) {
	if in := c.String("input"); in != "" {
		ti, err := finetune.NamedInput(m, in, int64(batch), h, w)
		if err != nil {
			return ti, cli.Exit(err.Error(), 2)
		}
		return ti, nil
	}
	layers, metaErr, err := resolve.Layers(c.String("model"))
	if err != nil {
		return finetune.TrainInput{}, err
	}
	if metaErr != nil {
		warnMetadata(metaErr)
	}
	ct, err := resolve.ReadContract(c.String("model"), m, resolve.Merge(layers))
	if err != nil {
		return finetune.TrainInput{}, cli.Exit(fmt.Sprintf("%v (name the image input with --input for other models)", err), 2)
	}
	given := finetune.Given{Size: c.IsSet("size"), Output: c.IsSet("logits"), ClassAxis: c.IsSet("class-axis"), Kind: c.IsSet("loss")}
	return finetune.ContractInput(ct, batch, h, w, given, loss), nil
}
