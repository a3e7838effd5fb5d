package main

import (
	"bytes"
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
	"github.com/segtune/segtune/internal/segmenter"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
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
	checkFrom  string
	quant      quantize.Options
	cal        quantize.CalibOptions
	keep       []string
	minAgree   float64
}

func runExport(c *cli.Context) error {
	p, err := planExport(c)
	if err != nil {
		return err
	}
	if err := initRuntime(c); err != nil {
		return err
	}
	// The float model and the settings images are fed with.
	var m *onnx.Model
	var settings imageio.Sidecar
	if p.checkpoint {
		if m, _, err = loadCheckpoint(p.source, p.base); err != nil {
			return err
		}
	} else if m, err = onnx.Load(p.source); err != nil {
		return err
	}
	if settings, err = modelSettings(c, p.source); err != nil {
		return err
	}
	ct, err := readContract(p.source, m, settings)
	if err != nil {
		return err
	}
	side, err := exportSettings(c, settings) // written beside and into the model
	if err != nil {
		return err
	}
	floatData, err := m.Marshal()
	if err != nil {
		return fmt.Errorf("%s: %w", p.source, err)
	}
	opts := sessionOptions(c)
	ref, err := segmenter.Open(floatData, ct, *settings.Preprocess, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", p.source, err)
	}
	defer ref.Close()
	bar := progress(c, len(p.calib), "calibrate")
	conv, err := deploy.Convert(m, ref, deploy.Options{
		Precision: p.precision, Quant: p.quant, Calib: p.cal, CalibImages: p.calib, Keep: p.keep,
		Session: opts, Progress: func(done, _ int) { bar.Set(done) },
	})
	bar.Finish()
	if err != nil {
		return fmt.Errorf("%s: %w", p.source, err)
	}
	// The exported model carries its settings in its metadata_props, as
	// its sidecar does.
	if err := models.EmbedSettings(conv.Model, side); err != nil {
		return fmt.Errorf("%s: %w", p.out, err)
	}
	data, err := conv.Model.Marshal()
	if err != nil {
		return fmt.Errorf("encoding %s: %w", p.out, err)
	}
	if len(data) > onnx.MaxModelBytes {
		return fmt.Errorf("%s would be %d bytes, more than the protobuf limit of 2 GiB", p.out, len(data))
	}
	rep := &deploy.Report{
		Precision: p.precision, Source: p.source, Output: p.out, SourceBytes: len(floatData), OutputBytes: len(data),
		Quantization: conv.Quant, Calibration: conv.Calibration, Float16: conv.Float16, MinAgreement: p.minAgree,
	}
	rep.ORTVersion, _ = runtime.Version()
	names := side.Classes
	images := p.checks
	if len(images) == 0 {
		// fp32 without check images: nothing to compare with but
		// itself; it must run and give finite scores on a synthetic image.
		checked, err := deploy.CheckRuns(ref, conv.Model, data, finetune.ContractOverrides(preprocessOf(settings), outputOf(settings)), opts)
		if err != nil {
			return fmt.Errorf("checking the %s export of %s on %s: %w; nothing written", p.precision, p.source, checked, err)
		}
		if checked == "" {
			notef(c, "segtune: export: the model runs on none of the synthetic check images' sizes; only its loading was checked (--check-images checks it on yours)")
		}
		rep.Passed = true
	} else {
		ignore := c.Int("ignore")
		if side.IgnoreLabel != nil {
			ignore = *side.IgnoreLabel
		}
		chk, err := deploy.CheckExport(ref, conv.Model, data, finetune.ContractOverrides(preprocessOf(settings), outputOf(settings)), deploy.CheckOptions{
			Images: images, Source: p.checkFrom, Masks: p.masks, LabelMap: side.LabelMap, Ignore: ignore, Names: names, Session: opts,
			Calibration: p.calibSet,
		})
		if err != nil {
			return fmt.Errorf("checking the %s export of %s: %w; nothing written", p.precision, p.source, err)
		}
		rep.Check = chk
		rep.Evaluate()
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	js, err := rep.JSON()
	if err != nil {
		return err
	}
	if c.Bool("json") {
		os.Stdout.Write(js)
	} else {
		os.Stdout.Write(text.Bytes())
	}
	if !rep.Passed {
		return cli.Exit(fmt.Sprintf("segtune: the %s export of %s failed its check (%s); nothing written (--min-agreement sets the bar)",
			p.precision, p.source, strings.Join(rep.Problems, "; ")), 1)
	}
	// The model, its settings and its report, each atomically.
	if err := atomicfile.Write(p.out, data, 0o644); err != nil {
		return err
	}
	if err := side.Save(imageio.SidecarPath(p.out)); err != nil {
		return err
	}
	jsonPath, textPath := deploy.ReportPaths(p.out)
	if rep.Check != nil {
		if err := atomicfile.Write(jsonPath, js, 0o644); err != nil {
			return err
		}
		if err := atomicfile.Write(textPath, text.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if !c.Bool("json") {
		fmt.Printf("wrote %s (%s, inputs %s, outputs %s)", p.out, mibString(len(data)), describe(conv.Model.Summary().Inputs), describe(conv.Model.Summary().Outputs))
		fmt.Printf(", %s", imageio.SidecarPath(p.out))
		if rep.Check != nil {
			fmt.Printf(", %s and %s", jsonPath, textPath)
		}
		fmt.Println()
	}
	return nil
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
	for _, item := range strings.Split(c.String("keep-float"), ",") {
		if item = strings.TrimSpace(item); item != "" {
			p.keep = append(p.keep, item)
		}
	}
	if p.precision == deploy.INT8 {
		dir := c.String("calibrate")
		if dir == "" {
			return nil, fmt.Errorf("--precision int8 needs --calibrate DIR: a folder of images like those the model will segment, to measure its activations' ranges on")
		}
		imgs, err := calibrationImages(c, dir)
		if err != nil {
			return nil, err
		}
		minImages := c.Int("calibrate-min-images")
		if minImages < 0 {
			return nil, cli.Exit(fmt.Sprintf("--calibrate-min-images %d: give a count of images, 0 for no minimum", minImages), 2)
		}
		if n := c.Int("calibrate-count"); n > 0 && n < minImages {
			return nil, fmt.Errorf("--calibrate-count %d is below --calibrate-min-images %d: ranges from so few images misrepresent real ones", n, minImages)
		}
		heldOut := false
		if c.IsSet("check-images") {
			p.calib = deploy.Sample(imgs, c.Int("calibrate-count"))
		} else {
			p.calib, p.checks, heldOut = deploy.HoldOut(imgs, c.Int("calibrate-count"), c.Int("check-count"), minImages)
		}
		if p.calibSet, err = deploy.ScreenImages(p.calib, imageio.Decoder{}); err != nil {
			return nil, fmt.Errorf("--calibrate: %w", err)
		}
		if err := p.calibSet.CheckCalibration(minImages); err != nil {
			return nil, fmt.Errorf("--calibrate %s: %w (--calibrate-min-images sets the bar)", dir, err)
		}
		if w := p.calibSet.NearConstantWarning(); w != "" {
			notef(c, "segtune: warning: %s", w)
		}
		method, err := quantize.ParseMethod(c.String("calibrate-method"))
		if err != nil {
			return nil, fmt.Errorf("--calibrate-method: %w", err)
		}
		if c.IsSet("percentile") && method != quantize.Percentile {
			return nil, fmt.Errorf("--percentile is for --calibrate-method percentile")
		}
		act, err := quantize.ParseQType(c.String("activation-type"))
		if err != nil {
			return nil, fmt.Errorf("--activation-type: %w", err)
		}
		p.cal = quantize.CalibOptions{Method: method, Percentile: c.Float64("percentile")}
		p.quant = quantize.Options{Activations: act, PerTensor: c.Bool("per-tensor"), ReduceRange: c.Bool("reduce-range"),
			Keep: p.keep, QuantizeOutputs: c.Bool("quantize-outputs"), FloatBias: c.Bool("float-bias")}
		p.checkFrom = "calibration images from " + dir
		if heldOut {
			p.checkFrom = "images of " + dir + " held out from calibration"
		}
	}
	if dir := c.String("check-images"); dir != "" {
		imgs, err := listImageDir(dir, "--check-images")
		if err != nil {
			return nil, err
		}
		p.checkFrom = dir
		if mdir := c.String("check-masks"); mdir != "" {
			pairing, err := imageio.PairDataset(dir, mdir)
			if err != nil {
				return nil, fmt.Errorf("--check-images/--check-masks: %w", err)
			}
			if err := pairing.Err(); err != nil {
				return nil, fmt.Errorf("--check-images %s / --check-masks %s: %w", dir, mdir, err)
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
