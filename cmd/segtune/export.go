package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/models/resolve"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
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
			maskPaletteFlag,
			&cli.IntFlag{Name: "ignore", Value: 255, Usage: "with --check-masks: mask label left out of scoring"},
			&cli.StringFlag{Name: "class-names", Usage: "comma-separated class names for the report"},
			deviceFlag, threadsFlag,
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON on stdout"},
		}, append(dataLayoutFlags("--calibrate"), preprocessFlags()...)...),
		Action: runExport,
	}
}

// defaultMinAgreement is the pixel agreement an export must reach unless
// --min-agreement says otherwise: the same graph in fp32 must agree with
// itself; fp16 is the acceptance level; 8-bit models of the
// shared person model agree on 99.8 % of CamVid's pixels, 95 % leaves
// room for harder models while catching a broken calibration.
var defaultMinAgreement = map[deploy.Precision]float64{deploy.FP32: 0.999, deploy.FP16: 0.99, deploy.INT8: 0.95}

// exportPlan is what runExport checks before any work.
type exportPlan struct {
	source     string // the checkpoint or model exported
	checkpoint bool
	base       string // --model with --checkpoint
	out        string
	precision  deploy.Precision
	calib      []string
	calibSet   *deploy.ImageSet
	checks     []string
	masks      map[string]string
	// maskPalette reads --check-masks that are RGB colour masks.
	maskPalette imageio.Palette
	checkFrom   string
	quant       quantize.Options
	cal         quantize.CalibOptions
	keep        []string
	minAgree    float64
}

func runExport(c *cli.Context) error {
	p, err := planExport(c)
	if err != nil {
		return err
	}
	if err := initRuntime(c); err != nil {
		return err
	}
	job, err := exportJob(c, p)
	if err != nil {
		return err
	}
	bar := progress(c, len(p.calib), "calibrate")
	job.Convert.Progress = func(done, _ int) { bar.Set(done) }
	exp, err := deploy.Export(job)
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
		return cli.Exit("segtune: "+err.Error()+" (--min-agreement sets the bar)", 1)
	}
	written, err := exp.Write()
	if err != nil {
		return err
	}
	if !c.Bool("json") {
		s := exp.Model.Summary()
		fmt.Printf("wrote %s (%s, inputs %s, outputs %s), %s", written[0], mibString(len(exp.Data)), describe(s.Inputs), describe(s.Outputs), written[1])
		if len(written) == 4 { // the reports
			fmt.Printf(", %s and %s", written[2], written[3])
		}
		fmt.Println()
	}
	return nil
}

// exportJob loads the float model (a checkpoint's network in its base
// graph, or the model) with the settings it is fed and checked with.
func exportJob(c *cli.Context, p *exportPlan) (deploy.Plan, error) {
	var m *onnx.Model
	var err error
	if p.checkpoint {
		m, _, err = resolve.LoadCheckpoint(p.source, p.base)
	} else {
		m, err = onnx.Load(p.source)
	}
	if err != nil {
		return deploy.Plan{}, err
	}
	settings, err := modelSettings(c, p.source)
	if err != nil {
		return deploy.Plan{}, err
	}
	ct, err := readContract(p.source, m, settings)
	if err != nil {
		return deploy.Plan{}, err
	}
	side, err := exportSettings(c, settings) // written beside and into the model
	if err != nil {
		return deploy.Plan{}, err
	}
	ignore := c.Int("ignore")
	if side.IgnoreLabel != nil {
		ignore = *side.IgnoreLabel
	}
	return deploy.Plan{
		Source: p.source, Model: m, Contract: ct, Preprocess: *settings.Preprocess,
		Overrides: resolve.Overrides(settings),
		Settings:  side, Out: p.out,
		Convert: deploy.Options{Precision: p.precision, Quant: p.quant, Calib: p.cal, CalibImages: p.calib, Keep: p.keep,
			Session: sessionOptions(c)},
		Check: deploy.CheckOptions{Images: p.checks, Source: p.checkFrom, Masks: p.masks, LabelMap: side.LabelMap, MaskPalette: p.maskPalette,
			Ignore: ignore, Names: side.Classes, Calibration: p.calibSet},
		MinAgreement: p.minAgree,
	}, nil
}

// exportSettings returns the settings an export writes beside and into
// the model: the source's, with --class-names, --label-map and --ignore
// where given.
func exportSettings(c *cli.Context, settings imageio.Sidecar) (imageio.Sidecar, error) {
	var o imageio.Sidecar
	if v := c.String("class-names"); v != "" {
		o.Classes = strings.Split(v, ",")
	}
	if v := c.String("label-map"); v != "" {
		lm, err := imageio.ParseLabelMap(v)
		if err != nil {
			return o, fmt.Errorf("--label-map: %w", err)
		}
		o.LabelMap = lm
	}
	if c.IsSet("ignore") {
		v := c.Int("ignore")
		o.IgnoreLabel = &v
	}
	s := settings.Merge(o)
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("--ignore/--class-names: %w", err)
	}
	return s, nil
}

// planExport reads and checks export's flags and files before any work:
// every mistake is reported naming its flag.
func planExport(c *cli.Context) (*exportPlan, error) {
	p := &exportPlan{out: c.String("out")}
	ck, model := c.String("checkpoint"), c.String("model")
	switch {
	case ck != "":
		p.source, p.checkpoint, p.base = ck, true, model
		if !isCheckpoint(ck) {
			f, _, err := regfile.Open(ck) // a FIFO or device is refused unopened
			if err != nil {
				return nil, fmt.Errorf("--checkpoint: %w", err)
			}
			f.Close()
			return nil, fmt.Errorf("--checkpoint %s is not a segtune checkpoint (pass an ONNX model with --model)", ck)
		}
	case model != "":
		p.source = model
		if isCheckpoint(model) {
			p.checkpoint = true
		}
	default:
		return nil, cli.Exit("segtune export: give --checkpoint C or --model M (the model to export)", 2)
	}
	var err error
	if p.precision, err = deploy.ParsePrecision(c.String("precision")); err != nil {
		return nil, fmt.Errorf("--precision: %w", err)
	}
	int8Only := []string{"calibrate", "calibrate-method", "percentile", "activation-type", "per-tensor", "reduce-range", "quantize-outputs", "float-bias", "calibrate-count", "calibrate-min-images", "format", "split"}
	if p.precision != deploy.INT8 {
		for _, f := range int8Only {
			if c.IsSet(f) {
				return nil, fmt.Errorf("--%s is for --precision int8 (this export is %s)", f, p.precision)
			}
		}
	}
	if c.IsSet("keep-float") && p.precision == deploy.FP32 {
		return nil, fmt.Errorf("--keep-float is for --precision fp16 or int8")
	}
	if c.IsSet("check-masks") && !c.IsSet("check-images") {
		return nil, fmt.Errorf("--check-masks needs --check-images (the images the masks belong to)")
	}
	if c.IsSet("mask-palette") && !c.IsSet("check-masks") {
		return nil, fmt.Errorf("--mask-palette is for reading --check-masks")
	}
	if p.maskPalette, _, err = maskPalette(c); err != nil {
		return nil, err
	}
	for _, item := range strings.Split(c.String("keep-float"), ",") {
		if item = strings.TrimSpace(item); item != "" {
			p.keep = append(p.keep, item)
		}
	}
	if p.precision == deploy.INT8 {
		if err := planCalibration(c, p); err != nil {
			return nil, err
		}
	}
	if dir := c.String("check-images"); dir != "" {
		if err := planCheckImages(c, p, dir); err != nil {
			return nil, err
		}
	}
	if p.precision == deploy.FP16 && len(p.checks) == 0 {
		return nil, fmt.Errorf("--precision fp16 needs --check-images DIR: images to compare the float16 model's predictions with the float model's on")
	}
	p.minAgree = defaultMinAgreement[p.precision]
	if c.IsSet("min-agreement") {
		p.minAgree = c.Float64("min-agreement")
	}
	if err := guardExportOutput(c, p); err != nil {
		return nil, err
	}
	return p, nil
}

// planCalibration reads int8's calibration flags into p: the images
// ranges are measured on (screened for too few distinct or blank ones),
// those held out to check on, and the quantizer's settings.
func planCalibration(c *cli.Context, p *exportPlan) error {
	dir := c.String("calibrate")
	if dir == "" {
		return fmt.Errorf("--precision int8 needs --calibrate DIR: a folder of images like those the model will segment, to measure its activations' ranges on")
	}
	imgs, err := calibrationImages(c, dir)
	if err != nil {
		return err
	}
	minImages := c.Int("calibrate-min-images")
	if minImages < 0 {
		return cli.Exit(fmt.Sprintf("--calibrate-min-images %d: give a count of images, 0 for no minimum", minImages), 2)
	}
	if n := c.Int("calibrate-count"); n > 0 && n < minImages {
		return fmt.Errorf("--calibrate-count %d is below --calibrate-min-images %d: ranges from so few images misrepresent real ones", n, minImages)
	}
	heldOut := false
	if c.IsSet("check-images") {
		p.calib = deploy.Sample(imgs, c.Int("calibrate-count"))
	} else {
		p.calib, p.checks, heldOut = deploy.HoldOut(imgs, c.Int("calibrate-count"), c.Int("check-count"), minImages)
	}
	if p.calibSet, err = deploy.ScreenImages(p.calib, imageio.Decoder{}); err != nil {
		return fmt.Errorf("--calibrate: %w", err)
	}
	if err := p.calibSet.CheckCalibration(minImages); err != nil {
		return fmt.Errorf("--calibrate %s: %w (--calibrate-min-images sets the bar)", dir, err)
	}
	if w := p.calibSet.NearConstantWarning(); w != "" {
		notef(c, "segtune: warning: %s", w)
	}
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
	p.cal = quantize.CalibOptions{Method: method, Percentile: c.Float64("percentile")}
	p.quant = quantize.Options{Activations: act, PerTensor: c.Bool("per-tensor"), ReduceRange: c.Bool("reduce-range"),
		Keep: p.keep, QuantizeOutputs: c.Bool("quantize-outputs"), FloatBias: c.Bool("float-bias")}
	p.checkFrom = "calibration images from " + dir
	if heldOut {
		p.checkFrom = "images of " + dir + " held out from calibration"
	}
	return nil
}

// planCheckImages reads --check-images DIR (and --check-masks) into p.
func planCheckImages(c *cli.Context, p *exportPlan, dir string) error {
	imgs, err := listImageDir(dir, "--check-images")
	if err != nil {
		return err
	}
	p.checkFrom = dir
	if mdir := c.String("check-masks"); mdir != "" {
		pairing, err := imageio.PairDataset(dir, mdir)
		if err != nil {
			return fmt.Errorf("--check-images/--check-masks: %w", err)
		}
		if err := pairing.Err(); err != nil {
			return fmt.Errorf("--check-images %s / --check-masks %s: %w", dir, mdir, err)
		}
		p.masks = map[string]string{}
		imgs = imgs[:0]
		for _, pr := range pairing.Pairs {
			imgs = append(imgs, pr.Image)
			p.masks[pr.Image] = pr.Mask
		}
		p.checkFrom = fmt.Sprintf("%s with masks from %s", dir, mdir)
	}
	p.checks = deploy.Sample(imgs, c.Int("check-count"))
	return nil
}

// listImageDir lists the images of a folder named by flag, refusing an
// empty or missing one.
func listImageDir(dir, flag string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s %s is not a folder of images", flag, dir)
	}
	imgs, err := imageio.ListImages(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("%s %s holds no images (%s)", flag, dir, strings.Join(imageio.ImageExtensions, " "))
	}
	return imgs, nil
}

// guardExportOutput refuses outputs that would replace one of export's
// inputs (the model, checkpoint, base model, their sidecars, the
// --preprocess file) or something other than a regular file: the model,
// its sidecar and its reports.
func guardExportOutput(c *cli.Context, p *exportPlan) error {
	inputs := map[string]string{}
	addInput := func(path, what string) {
		if path == "" {
			return
		}
		if r, err := resolvePath(path); err == nil {
			inputs[r] = what
		}
	}
	addInput(p.source, "the model being exported")
	addInput(imageio.SidecarPath(p.source), "the exported model's sidecar")
	addInput(p.base, "the checkpoint's base model")
	addInput(imageio.SidecarPath(p.base), "the base model's sidecar")
	if p.checkpoint {
		// The base model the checkpoint names (when --model does not
		// give another) and every checkpoint of its run: replacing them
		// would orphan the run or lose its resume point.
		if p.base == "" {
			base := finetune.CheckpointBase(p.source)
			addInput(base, "the checkpoint's base model")
			addInput(imageio.SidecarPath(base), "the base model's sidecar")
		}
		ckpts, _ := filepath.Glob(filepath.Join(filepath.Dir(p.source), "*.ckpt"))
		for _, ck := range ckpts {
			addInput(ck, "a checkpoint of the run")
		}
	}
	addInput(c.String("preprocess"), "the --preprocess file")
	jsonPath, textPath := deploy.ReportPaths(p.out)
	outputs := []struct{ path, what string }{
		{p.out, "--out"}, {imageio.SidecarPath(p.out), "the sidecar of --out"},
		{jsonPath, "the JSON report"}, {textPath, "the text report"},
	}
	for _, o := range outputs {
		r, err := resolvePath(o.path)
		if err != nil {
			return fmt.Errorf("--out %s: %w", p.out, err)
		}
		if what, ok := inputs[r]; ok {
			return fmt.Errorf("--out %s: %s (%s) would replace %s; choose another output file", p.out, o.what, o.path, what)
		}
		if _, err := atomicfile.Target(o.path); err != nil {
			return fmt.Errorf("--out %s: %w", p.out, err)
		}
	}
	// A missing folder is made now, as segment and finetune make theirs,
	// rather than found missing after the conversion and its check.
	if err := os.MkdirAll(filepath.Dir(p.out), 0o755); err != nil {
		return fmt.Errorf("--out %s: %w", p.out, err)
	}
	return nil
}

func mibString(n int) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func describe(vs []onnx.Value) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %s", v.Name, shapeOf(v.Dims))
	}
	return out
}

func shapeOf(dims []string) string {
	return "[" + strings.Join(dims, ",") + "]"
}
