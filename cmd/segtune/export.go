package main

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/runtime"
)

func exportCommand() *cli.Command {
	o := &exportOptions{}
	return &cli.Command{
		Name:  "export",
		Usage: "write a model or a checkpoint's refined network for deployment: fp32, fp16 or calibrated int8, checked against the float model",
		Description: "From --checkpoint C (the refined network in a clean copy of its base graph: the base model's\n" +
			"inputs and outputs, the new class count if the run replaced the classifier, nothing of the\n" +
			"training graph) or --model M. --precision fp16 stores weights and computes activations in\n" +
			"float16 where that is safe, keeping float32 inputs and outputs; --precision int8 writes a\n" +
			"static QDQ model (int8 weights per channel, uint8 activations) calibrated on --calibrate DIR.\n" +
			"Before anything is written the model is opened in ONNX Runtime, its contract compared with\n" +
			"the float model's, and both models segment sample images (--check-images, else images of\n" +
			"the --calibrate folder held out from calibration where it has enough; with none, a synthetic\n" +
			"image, which must give finite scores): the pixel\n" +
			"agreement, and with --check-masks each model's IoU, go into a report printed and saved as\n" +
			"OUT.report.json and OUT.report.txt; a model below\n" +
			"--min-agreement is not written. The model's settings (preprocessing, classes, palette, label\n" +
			"map, ignore label) are written into its metadata_props (key segtune.contract) and beside it\n" +
			"as OUT.segtune.json.",
		Flags:  slices.Concat(exportFlags(o), dataLayoutFlags(&o.Layout, "--calibrate"), preprocessFlags(&o.Pre)),
		Action: func(c *cli.Context) error { return runExport(c, o) },
	}
}

// exportOptions are export's settings: deploy's, the calibration
// folder's layout, the masks' reading, the model's preprocessing and
// session, and how it reports.
type exportOptions struct {
	deploy.Settings
	Layout                dataLayout
	LabelMap, MaskPalette string
	Pre                   preprocessOptions
	Session               runtime.Options
	JSON                  bool
}

// exportFlags bind export's own flags into o.
func exportFlags(o *exportOptions) []cli.Flag {
	def := deploy.DefaultSettings()
	o.Settings = def
	s := &o.Settings
	return slices.Concat([]cli.Flag{
		&cli.StringFlag{Name: "checkpoint", Aliases: []string{"c"}, Usage: "checkpoint to export (e.g. OUT/best.ckpt)", Destination: &s.Checkpoint},
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "ONNX model to export; with --checkpoint, its base model if it moved since training", Destination: &s.Model},
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "ONNX file to write", Destination: &s.Out},
		&cli.StringFlag{Name: "precision", Value: def.Precision, Usage: "fp32, fp16 or int8", Destination: &s.Precision},
		&cli.IntFlag{Name: "opset", DefaultText: "the model's own; 13 for int8 of a model older than opset 10", Usage: "write the model at this ONNX opset, its operators upgraded (Upsample → Resize, attributes that became inputs …) and checked against the original", Destination: &s.Opset},
		&cli.StringFlag{Name: "calibrate", Usage: "int8: folder of images to calibrate activation ranges on (like those the model will see), or a labelled data folder in any known layout (its training split's images)", Destination: &s.Calibrate},
		&cli.IntFlag{Name: "calibrate-count", Value: def.CalibrateCount, Usage: "int8: calibrate on this many images, spread over the folder (0: all)", Destination: &s.CalibrateCount},
		&cli.IntFlag{Name: "calibrate-min-images", Value: def.CalibrateMinImages, Usage: "int8: refuse to calibrate on fewer distinct, not near-constant (blank) images", Destination: &s.CalibrateMinImages},
		&cli.StringFlag{Name: "calibrate-method", Value: def.CalibrateMethod, Usage: "int8: minmax, percentile or entropy", Destination: &s.CalibrateMethod},
		&cli.Float64Flag{Name: "percentile", Value: def.Percentile, Usage: "int8: the share of values (%) percentile calibration keeps in range", Destination: &s.Percentile},
		&cli.StringFlag{Name: "activation-type", Value: def.ActivationType, Usage: "int8: activations as uint8 or int8 (weights are always symmetric int8)", Destination: &s.ActivationType},
		&cli.BoolFlag{Name: "per-tensor", Usage: "int8: one scale per weight tensor instead of one per output channel", Destination: &s.PerTensor},
		&cli.BoolFlag{Name: "reduce-range", Usage: "int8: 7-bit weights, for CPUs without VNNI where 8-bit products can saturate", Destination: &s.ReduceRange},
		&cli.BoolFlag{Name: "quantize-outputs", Usage: "int8: quantize the graph's outputs too (by default the scores stay float)", Destination: &s.QuantizeOutputs},
		&cli.BoolFlag{Name: "float-bias", Usage: "int8: keep Conv biases float instead of int32", Destination: &s.FloatBias},
		&cli.StringFlag{Name: "keep-float", Usage: "fp16/int8: comma-separated op types, node names or names of tensors nodes produce, left in float32 (e.g. Softmax,logits_conv)", Destination: &s.KeepFloat},
		&cli.StringFlag{Name: "check-images", Usage: "images to compare the exported model with the float model on (default: images of the --calibrate folder held out from calibration)", Destination: &s.CheckImages},
		&cli.StringFlag{Name: "check-masks", Usage: "masks of --check-images (same base names): score both models' IoU", Destination: &s.CheckMasks},
		&cli.IntFlag{Name: "check-count", Value: def.CheckCount, Usage: "compare on this many images, spread over the folder (0: all)", Destination: &s.CheckCount},
		&cli.Float64Flag{Name: "min-agreement", DefaultText: "0.999 fp32, 0.99 fp16, 0.95 int8", Usage: "refuse to write a model whose predictions agree with the float model's on a smaller share of pixels", Destination: &s.MinAgreement},
		labelMapFlag(&o.LabelMap, `with --check-masks: remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`),
		maskPaletteFlag(&o.MaskPalette),
		&cli.IntFlag{Name: "ignore", Value: evaluate.DefaultIgnore, Usage: "with --check-masks: mask label left out of scoring", Destination: &s.Ignore},
		classNamesFlag(&s.ClassNames, "comma-separated class names for the report"),
	}, sessionFlags(&o.Session), []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the report as JSON on stdout", Destination: &o.JSON}})
}

func runExport(c *cli.Context, o *exportOptions) error {
	o.Given = given(c)
	p, err := o.Settings.Prepare(deploy.Sources{Layout: datalayout.Layout(o.Layout), LabelMap: o.LabelMap, MaskPalette: o.MaskPalette,
		Keep: []deploy.File{{Path: o.Pre.File, What: "the {preprocess} file"}}, Notes: dataNotes(c)})
	if errors.Is(err, deploy.ErrNoSource) {
		return fmt.Errorf("segtune export: %w", err)
	} else if err != nil {
		return err
	}
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	plan, err := exportPlan(c, o, p)
	if err != nil {
		return err
	}
	bar := progress(c, len(p.Calibration), "calibrate")
	plan.Convert.Progress = func(done, _ int) { bar.Set(done) }
	exp, err := deploy.Export(plan)
	bar.Finish()
	if exp == nil {
		return err
	}
	if exp.Unchecked {
		notef(c, "segtune: export: the model runs on none of the synthetic check images' sizes; only its loading was checked (--check-images checks it on yours)")
	}
	return exp.Finish(os.Stdout, o.JSON, err)
}

// exportPlan loads the float model and plans its export, fed and read
// with the model's settings and the preprocessing flags.
func exportPlan(c *cli.Context, o *exportOptions, p *deploy.Prepared) (deploy.Plan, error) {
	m, err := p.Load()
	if err != nil {
		return deploy.Plan{}, err
	}
	settings, err := o.Pre.modelSettings(c, p.Source)
	if err != nil {
		return deploy.Plan{}, err
	}
	plan, err := p.Plan(m, settings.Sidecar)
	plan.Convert.Session = sessionFor(c, o.Session)
	return plan, err
}
