package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/resolve"
)

func exportCommand() *cli.Command {
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
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Aliases: []string{"c"}, Usage: "checkpoint to export (e.g. OUT/best.ckpt)"},
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "ONNX model to export; with --checkpoint, its base model if it moved since training"},
			&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "ONNX file to write"},
			&cli.StringFlag{Name: "precision", Value: "fp32", Usage: "fp32, fp16 or int8"},
			&cli.IntFlag{Name: "opset", DefaultText: "the model's own; 13 for int8 of a model older than opset 10", Usage: "write the model at this ONNX opset, its operators upgraded (Upsample → Resize, attributes that became inputs …) and checked against the original"},
			&cli.StringFlag{Name: "calibrate", Usage: "int8: folder of images to calibrate activation ranges on (like those the model will see), or a labelled data folder in any known layout (its training split's images)"},
			&cli.IntFlag{Name: "calibrate-count", Value: 64, Usage: "int8: calibrate on this many images, spread over the folder (0: all)"},
			&cli.IntFlag{Name: "calibrate-min-images", Value: deploy.MinCalibrationImages, Usage: "int8: refuse to calibrate on fewer distinct, not near-constant (blank) images"},
			&cli.StringFlag{Name: "calibrate-method", Value: "minmax", Usage: "int8: minmax, percentile or entropy"},
			&cli.Float64Flag{Name: "percentile", Value: quantize.DefaultPercentile, Usage: "int8: the share of values (%) percentile calibration keeps in range"},
			&cli.StringFlag{Name: "activation-type", Value: "uint8", Usage: "int8: activations as uint8 or int8 (weights are always symmetric int8)"},
			&cli.BoolFlag{Name: "per-tensor", Usage: "int8: one scale per weight tensor instead of one per output channel"},
			&cli.BoolFlag{Name: "reduce-range", Usage: "int8: 7-bit weights, for CPUs without VNNI where 8-bit products can saturate"},
			&cli.BoolFlag{Name: "quantize-outputs", Usage: "int8: quantize the graph's outputs too (by default the scores stay float)"},
			&cli.BoolFlag{Name: "float-bias", Usage: "int8: keep Conv biases float instead of int32"},
			&cli.StringFlag{Name: "keep-float", Usage: "fp16/int8: comma-separated op types, node names or names of tensors nodes produce, left in float32 (e.g. Softmax,logits_conv)"},
			&cli.StringFlag{Name: "check-images", Usage: "images to compare the exported model with the float model on (default: images of the --calibrate folder held out from calibration)"},
			&cli.StringFlag{Name: "check-masks", Usage: "masks of --check-images (same base names): score both models' IoU"},
			&cli.IntFlag{Name: "check-count", Value: 32, Usage: "compare on this many images, spread over the folder (0: all)"},
			&cli.Float64Flag{Name: "min-agreement", DefaultText: "0.999 fp32, 0.99 fp16, 0.95 int8", Usage: "refuse to write a model whose predictions agree with the float model's on a smaller share of pixels"},
			&cli.StringFlag{Name: "label-map", Usage: `with --check-masks: remap mask labels to model classes, e.g. "9,10:1;11:255;*:0"`},
			maskPaletteFlag(new(string)),
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "with --check-masks: mask label left out of scoring"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			deviceFlag(new(string)), threadsFlag(new(int)),
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON on stdout"},
		}, append(dataLayoutFlags(new(dataLayout), "--calibrate"), preprocessFlags(new(preprocessOptions))...)...),
		Action: runExport,
	}
}

func runExport(c *cli.Context) error {
	p, err := planExport(c)
	if err != nil {
		return err
	}
	if err := initRuntime(c); err != nil {
		return err
	}
	plan, err := exportPlan(c, p)
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
	if c.Bool("json") {
		js, jerr := exp.Report.JSON()
		if jerr != nil {
			return jerr
		}
		os.Stdout.Write(js)
	} else {
		exp.Report.WriteText(os.Stdout)
	}
	if err != nil {
		return cli.Exit(err.Error()+" (--min-agreement sets the bar)", 1)
	}
	written, err := exp.Write()
	if err == nil && !c.Bool("json") {
		fmt.Println(exp.Summary(written))
	}
	return err
}

// exportPlan loads the float model and plans its export, fed and read
// with the model's settings and the preprocessing flags.
func exportPlan(c *cli.Context, p *deploy.Prepared) (deploy.Plan, error) {
	m, err := p.Load()
	if err != nil {
		return deploy.Plan{}, err
	}
	settings, err := modelSettings(c, p.Source)
	if err != nil {
		return deploy.Plan{}, err
	}
	plan, err := p.Plan(m, settings)
	plan.Convert.Session = sessionOptions(c)
	return plan, requestFlagError(p.Request, err)
}

// planExport reads export's flags into a deploy request, prepares it
// (deploy.Prepare) and checks its outputs before any work: every mistake
// is reported naming its flag.
func planExport(c *cli.Context) (*deploy.Prepared, error) {
	r, err := exportRequest(c)
	if err != nil {
		return nil, err
	}
	p, err := deploy.Prepare(*r)
	if err != nil {
		return nil, requestFlagError(*r, err)
	}
	if p.Warning != "" {
		notef(c, "segtune: warning: %s", p.Warning)
	}
	if err := r.CheckOutputs(deploy.File{Path: c.String("preprocess"), What: "the {preprocess} file"}); err != nil {
		return nil, withFlagNames(fmt.Errorf("--out %s: %w", r.Out, err))
	}
	return p, nil
}

// int8Only are export's flags for --precision int8 alone.
var int8Only = []string{"calibrate", "calibrate-method", "percentile", "activation-type", "per-tensor", "reduce-range",
	"quantize-outputs", "float-bias", "calibrate-count", "calibrate-min-images", "format", "split"}

// exportRequest reads the model, output, precision, check and settings
// flags, and int8's calibration flags.
func exportRequest(c *cli.Context) (*deploy.Request, error) {
	r := &deploy.Request{Out: c.String("out"), CheckImages: c.String("check-images"), CheckMasks: c.String("check-masks"),
		CheckCount: c.Int("check-count"), Keep: listflag.Split(c.String("keep-float"))}
	ck, model := c.String("checkpoint"), c.String("model")
	switch {
	case ck != "":
		r.Source, r.Checkpoint, r.Base = ck, true, model
	case model != "":
		r.Source, r.Checkpoint = model, resolve.IsCheckpoint(model)
	default:
		return nil, cli.Exit("segtune export: give --checkpoint C or --model M (the model to export)", 2)
	}
	var err error
	if r.Precision, err = deploy.ParsePrecision(c.String("precision")); err != nil {
		return nil, fmt.Errorf("--precision: %w", err)
	}
	r.Opset = int64(c.Int("opset"))
	if err := checkPrecisionFlags(c, r.Precision); err != nil {
		return nil, err
	}
	r.MinAgreement = deploy.DefaultMinAgreement[r.Precision]
	if c.IsSet("min-agreement") {
		r.MinAgreement = c.Float64("min-agreement")
	}
	masks, _, err := maskFlags(c)
	if err != nil {
		return nil, err
	}
	// These replace the model's own settings.
	r.LabelMap, r.MaskPalette, r.IgnoreLabel, r.ClassNames = masks.Map, masks.Palette, ifSet(c, "ignore", c.Int), classNames(c)
	if r.Precision != deploy.INT8 {
		return r, nil
	}
	return r, calibrationRequest(c, r)
}

// checkPrecisionFlags refuses flags given without the precision or the
// other flag they are for.
func checkPrecisionFlags(c *cli.Context, precision deploy.Precision) error {
	if precision != deploy.INT8 {
		for _, f := range int8Only {
			if c.IsSet(f) {
				return fmt.Errorf("--%s is for --precision int8 (this export is %s)", f, precision)
			}
		}
	}
	if c.IsSet("keep-float") && precision == deploy.FP32 {
		return fmt.Errorf("--keep-float is for --precision fp16 or int8")
	}
	if c.IsSet("check-masks") && !c.IsSet("check-images") {
		return fmt.Errorf("--check-masks needs --check-images (the images the masks belong to)")
	}
	if c.IsSet("mask-palette") && !c.IsSet("check-masks") {
		return fmt.Errorf("--mask-palette is for reading --check-masks")
	}
	return nil
}

// calibrationRequest reads int8's calibration flags into r: the images
// of --calibrate DIR and the quantizer's settings.
func calibrationRequest(c *cli.Context, r *deploy.Request) error {
	dir := c.String("calibrate")
	if dir == "" {
		return fmt.Errorf("--precision int8 needs --calibrate DIR: a folder of images like those the model will segment, to measure its activations' ranges on")
	}
	imgs, err := calibrationImages(c, dir)
	if err != nil {
		return err
	}
	r.CalibrationDir, r.CalibrationImages = dir, imgs
	r.CalibrationCount, r.MinCalibration = c.Int("calibrate-count"), c.Int("calibrate-min-images")
	method, err := quantize.ParseMethod(c.String("calibrate-method"))
	if err != nil {
		return fmt.Errorf("--calibrate-method: %w", err)
	}
	if c.IsSet("percentile") && method != quantize.Percentile {
		return fmt.Errorf("--percentile is for --calibrate-method percentile")
	}
	act, err := quantize.ParseQType(c.String("activation-type"))
	if err != nil {
		return fmt.Errorf("--activation-type: %w", err)
	}
	r.Calib = quantize.CalibOptions{Method: method, Percentile: c.Float64("percentile")}
	r.Quant = quantize.Options{Activations: act, PerTensor: c.Bool("per-tensor"), ReduceRange: c.Bool("reduce-range"),
		Keep: r.Keep, QuantizeOutputs: c.Bool("quantize-outputs"), FloatBias: c.Bool("float-bias")}
	return nil
}

// requestFlagError names the flags of a deploy.RequestError about r.
func requestFlagError(r deploy.Request, err error) error {
	var re *deploy.RequestError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case errors.Is(err, deploy.ErrNotCheckpoint):
		return fmt.Errorf("--checkpoint %s is not a segtune checkpoint (pass an ONNX model with --model)", r.Source)
	case errors.Is(err, deploy.ErrNegativeMinimum):
		return cli.Exit(fmt.Sprintf("--calibrate-min-images %d: %v", r.MinCalibration, re.Err), 2)
	case re.Field == "CalibrationCount":
		return fmt.Errorf("--calibrate-count %d is below --calibrate-min-images %d: %v", r.CalibrationCount, r.MinCalibration, re.Err)
	case errors.Is(err, deploy.ErrNoCheckImages):
		return errors.New("--precision fp16 needs --check-images DIR: images to compare the float16 model's predictions with the float model's on")
	}
	return withFlagNames(err)
}

// imageDirError is deploy.ListImageDir's error naming flag.
func imageDirError(flag string, err error) error {
	var fe *deploy.FolderError
	switch {
	case !errors.As(err, &fe):
		return fmt.Errorf("%s: %w", flag, err)
	case errors.Is(fe.Err, deploy.ErrNotFolder):
		return fmt.Errorf("%s %s is not a folder of images", flag, fe.Dir)
	case errors.Is(fe.Err, deploy.ErrNoImages):
		return fmt.Errorf("%s %s %w", flag, fe.Dir, fe.Err)
	}
	return fmt.Errorf("%s %s: %w", flag, fe.Dir, fe.Err)
}
