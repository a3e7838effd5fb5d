package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/resolve"
)

// DefaultMinAgreement is the pixel agreement an export must reach unless
// its Request says otherwise: the same graph in fp32 must agree with
// itself; fp16 at 99 %; 8-bit models of the shared person model agree on
// 99.8 % of CamVid's pixels, 95 % leaves room for harder models while
// catching a broken calibration.
var DefaultMinAgreement = map[Precision]float64{FP32: 0.999, FP16: 0.99, INT8: 0.95}

// Request is an export as its caller asks for it, before any file is
// read: what is exported, where to, at which precision, and the images
// it is calibrated and checked on. Prepare reads and checks its files.
type Request struct {
	// Source is the model or checkpoint exported (Checkpoint says which);
	// Base, with a checkpoint, is its base model if it moved since
	// training.
	Source     string
	Checkpoint bool
	Base       string
	// Out is the ONNX file written.
	Out       string
	Precision Precision
	// Opset is the opset the model is written at (0: its own, raised to
	// 13 for an int8 export of a model older than opset 10); the model's
	// operators are upgraded to it (onnx/upgrade).
	Opset int64
	// CalibrationImages (int8) are the images of CalibrationDir that
	// activation ranges may be measured on: CalibrationCount of them
	// (0: all), spread over the list, of which at least MinCalibration
	// distinct, not near-constant ones. Calib and Quant configure the
	// quantizer.
	CalibrationDir    string
	CalibrationImages []string
	CalibrationCount  int
	MinCalibration    int
	Calib             quantize.CalibOptions
	Quant             quantize.Options
	// Keep names op types, nodes or tensors left in float32 (fp16, int8).
	Keep []string
	// CheckImages is a folder of images the exported model is compared
	// with the float model on, CheckMasks their masks (read with
	// MaskPalette when they are colour masks). Without it an int8 export
	// holds calibration images out to check on. CheckCount images are
	// used (0: all).
	CheckImages, CheckMasks string
	CheckCount              int
	MaskPalette             imageio.Palette
	// MinAgreement is the pixel agreement the export must reach.
	MinAgreement float64
	// ClassNames, LabelMap and IgnoreLabel, where set, replace the model's
	// own in the settings the exported model carries, which the check
	// reads masks with. With no ignore label from either, masks' label
	// evaluate.DefaultIgnore is left out of scoring.
	ClassNames  []string
	LabelMap    *imageio.LabelMap
	IgnoreLabel *int
}

// Prepared is a Request whose images are chosen and screened.
type Prepared struct {
	Request
	// Calibration are the images ranges are measured on; Checks those the
	// export is compared on, with their masks when Request has masks.
	Calibration []string
	Checks      []string
	Masks       map[string]string
	// Warning names calibration images that look blank ("" when none
	// does).
	Warning   string
	calibSet  *ImageSet
	checkFrom string
	// model is the float model where Prepare loaded it already.
	model *onnx.Model
}

// RequestError is a setting, file or folder of a Request that cannot be
// used. Field names the Request's field: Source (a checkpoint that cannot
// be read, or ErrNotCheckpoint), CalibrationImages (an image
// that cannot be read), CalibrationDir (the calibration folder cannot be
// listed or holds no images), MinCalibration (too few usable images, or
// ErrNegativeMinimum), CalibrationCount (ErrBelowMinimum), CheckImages
// (the folder cannot be listed, or ErrNoCheckImages), CheckMasks (the
// folders cannot be paired), CheckPairs (images without masks or masks
// without images), Settings (the settings the exported model would
// carry are invalid) or Opset (the model cannot be written at it).
//
// Its message names the Request's settings by their keys (Named).
type RequestError struct {
	Field string
	Path  string
	// Masks is the masks folder of CheckPairs (Path: the images').
	Masks string
	// Opset is the opset asked for, of Opset (0: the one int8 needs).
	Opset int64
	// Count and Min are the Request's CalibrationCount and MinCalibration,
	// of those two fields' errors.
	Count, Min int
	Err        error
}

func (e *RequestError) Error() string { return e.Named(setting.Key) }

// Named is the message with the Request's settings called name(key).
func (e *RequestError) Named(name func(key string) string) string {
	say := func(format string, args ...any) string {
		return setting.Sprintf(name, format, append(args, e.Err)...)
	}
	var fe *FolderError
	switch e.Field {
	case "Source":
		if errors.Is(e.Err, ErrNotCheckpoint) {
			return setting.Sprintf(name, "{checkpoint} %s is not a segtune checkpoint (pass an ONNX model with {model})", e.Path)
		}
		return say("{checkpoint}: %v")
	case "CalibrationImages":
		return say("{calibrate}: %v")
	case "CalibrationCount":
		return say("{calibrate_count} %d is below {calibrate_min_images} %d: %v", e.Count, e.Min)
	case "MinCalibration":
		if errors.Is(e.Err, ErrNegativeMinimum) {
			return say("{calibrate_min_images} %d: %v", e.Min)
		}
		if e.Path != "" {
			return say("{calibrate} %s: %v ({calibrate_min_images} sets the bar)", e.Path)
		}
	case "CheckImages", "CalibrationDir":
		key := map[string]string{"CheckImages": "check_images", "CalibrationDir": "calibrate"}[e.Field]
		switch {
		case errors.Is(e.Err, ErrNoCheckImages):
			return setting.Sprintf(name, "{precision} fp16 needs {check_images} DIR: images to compare the float16 model's predictions with the float model's on")
		case e.Field == "CalibrationDir" && e.Path != "": // a data set without images
			return say("{calibrate} %s: %v", e.Path)
		case !errors.As(e.Err, &fe):
			return say("{" + key + "}: %v")
		case errors.Is(fe.Err, ErrNotFolder):
			return setting.Sprintf(name, "{"+key+"} %s is not a folder of images", fe.Dir)
		case errors.Is(fe.Err, ErrNoImages):
			return setting.Sprintf(name, "{"+key+"} %s %v", fe.Dir, fe.Err)
		}
		return setting.Sprintf(name, "{"+key+"} %s: %v", fe.Dir, fe.Err)
	case "CheckMasks":
		return say("{check_images}/{check_masks}: %v")
	case "CheckPairs":
		return say("{check_images} %s / {check_masks} %s: %v", e.Path, e.Masks)
	case "Opset":
		if e.Opset != 0 {
			return say("{opset} %d: %v", e.Opset)
		}
		return say("{precision} int8: %v")
	case "Precision":
		return say("{precision} int8: %v")
	case "Settings":
		return say("{ignore}/{class_names}: %v")
	}
	if e.Path == "" {
		return e.Field + ": " + e.Err.Error()
	}
	return e.Field + " " + e.Path + ": " + e.Err.Error()
}

func (e *RequestError) Unwrap() error { return e.Err }

// Why Prepare refuses a Request's counts or its missing check images.
var (
	ErrNegativeMinimum = errors.New("give a count of images, 0 for no minimum")
	ErrBelowMinimum    = errors.New("ranges from so few images misrepresent real ones")
	ErrNoCheckImages   = errors.New("an fp16 export needs check images: images to compare the float16 model's predictions with the float model's on")
	// ErrNotCheckpoint is a Source said to be a checkpoint that is not one.
	ErrNotCheckpoint = errors.New("not a segtune checkpoint")
)

// Prepare chooses and screens the images r calibrates and checks on. An
// fp16 export needs check images; an int8 export needs calibration
// images, at least MinCalibration of them, and no fewer to calibrate on.
func Prepare(r Request) (*Prepared, error) {
	if r.Checkpoint && !resolve.IsCheckpoint(r.Source) {
		f, _, err := regfile.Open(r.Source) // a FIFO or device is refused unopened
		if err != nil {
			return nil, &RequestError{Field: "Source", Err: err}
		}
		f.Close()
		return nil, &RequestError{Field: "Source", Path: r.Source, Err: ErrNotCheckpoint}
	}
	p := &Prepared{Request: r}
	if r.Precision == INT8 {
		if err := p.prepareCalibration(); err != nil {
			return nil, err
		}
	}
	if r.CheckImages != "" {
		if err := p.prepareChecks(); err != nil {
			return nil, err
		}
	}
	if r.Precision == FP16 && len(p.Checks) == 0 {
		return nil, &RequestError{Field: "CheckImages", Err: ErrNoCheckImages}
	}
	return p, nil
}

// prepareCalibration picks the images ranges are measured on (screened
// for too few distinct or blank ones) and, without check images, those
// held out to check on.
func (p *Prepared) prepareCalibration() error {
	r := p.Request
	if len(r.CalibrationImages) == 0 {
		return errors.New("an int8 export needs calibration images like those the model will segment, to measure its activations' ranges on")
	}
	if r.MinCalibration < 0 {
		return &RequestError{Field: "MinCalibration", Min: r.MinCalibration, Err: ErrNegativeMinimum}
	}
	if n := r.CalibrationCount; n > 0 && n < r.MinCalibration {
		return &RequestError{Field: "CalibrationCount", Count: n, Min: r.MinCalibration, Err: ErrBelowMinimum}
	}
	if !r.Checkpoint {
		// A quantized model is refused before its calibration images are
		// read. The model loaded for that is the one Load returns; one
		// that cannot be loaded is Load's to report.
		if m, err := onnx.Load(r.Source); err == nil {
			if err := refuseQuantized(m); err != nil {
				return err
			}
			p.model = m
		}
	}
	heldOut := false
	if r.CheckImages != "" {
		p.Calibration = Sample(r.CalibrationImages, r.CalibrationCount)
	} else {
		p.Calibration, p.Checks, heldOut = HoldOut(r.CalibrationImages, r.CalibrationCount, r.CheckCount, r.MinCalibration)
	}
	var err error
	if p.calibSet, err = ScreenImages(p.Calibration, imageio.Decoder{}); err != nil {
		return &RequestError{Field: "CalibrationImages", Err: err}
	}
	if err := p.calibSet.CheckCalibration(r.MinCalibration); err != nil {
		return &RequestError{Field: "MinCalibration", Path: r.CalibrationDir, Err: err}
	}
	p.Warning = p.calibSet.NearConstantWarning()
	p.checkFrom = "calibration images from " + r.CalibrationDir
	if heldOut {
		p.checkFrom = "images of " + r.CalibrationDir + " held out from calibration"
	}
	return nil
}

// prepareChecks lists the check images, paired with their masks.
func (p *Prepared) prepareChecks() error {
	dir, mdir := p.CheckImages, p.CheckMasks
	imgs, err := ListImageDir(dir)
	if err != nil {
		return &RequestError{Field: "CheckImages", Path: dir, Err: err}
	}
	p.checkFrom = dir
	if mdir != "" {
		pairing, err := imageio.PairDataset(dir, mdir)
		if err != nil {
			return &RequestError{Field: "CheckMasks", Path: mdir, Err: err}
		}
		if err := pairing.Err(); err != nil {
			return &RequestError{Field: "CheckPairs", Path: dir, Masks: mdir, Err: err}
		}
		p.Masks = map[string]string{}
		imgs = imgs[:0]
		for _, pr := range pairing.Pairs {
			imgs = append(imgs, pr.Image)
			p.Masks[pr.Image] = pr.Mask
		}
		p.checkFrom = fmt.Sprintf("%s with masks from %s", dir, mdir)
	}
	p.Checks = Sample(imgs, p.CheckCount)
	return nil
}

// ErrNotFolder and ErrNoImages are why ListImageDir refuses a folder.
var (
	ErrNotFolder = errors.New("not a folder of images")
	ErrNoImages  = fmt.Errorf("holds no images (%s)", strings.Join(imageio.ImageExtensions, " "))
)

// FolderError is a folder of images that cannot be used: missing,
// not a folder (ErrNotFolder) or empty (ErrNoImages).
type FolderError struct {
	Dir string
	Err error
}

func (e *FolderError) Error() string { return e.Dir + ": " + e.Err.Error() }
func (e *FolderError) Unwrap() error { return e.Err }

// ListImageDir lists the images directly in dir, refusing an empty or
// missing folder with a *FolderError. An unreadable folder's error is
// imageio.ListImages's.
func ListImageDir(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, &FolderError{Dir: dir, Err: err}
	}
	if !st.IsDir() {
		return nil, &FolderError{Dir: dir, Err: ErrNotFolder}
	}
	imgs, err := imageio.ListImages(dir)
	if err != nil {
		return nil, err
	}
	if len(imgs) == 0 {
		return nil, &FolderError{Dir: dir, Err: ErrNoImages}
	}
	return imgs, nil
}

// File is a file an export reads or writes, and what it is to the export
// (naming settings by {key}, setting.Advice).
type File struct {
	Path, What string
}

// Inputs are the files the export reads that its outputs must not
// replace: the model or checkpoint, the base model, their sidecars and,
// for a checkpoint, every checkpoint of its run (replacing them would
// orphan the run or lose its resume point).
func (r Request) Inputs() []File {
	var in []File
	add := func(path, what string) {
		if path != "" {
			in = append(in, File{path, what})
		}
	}
	add(r.Source, "the model being exported")
	add(imageio.SidecarPath(r.Source), "the exported model's sidecar")
	add(r.Base, "the checkpoint's base model")
	add(imageio.SidecarPath(r.Base), "the base model's sidecar")
	if r.Checkpoint {
		if r.Base == "" {
			base := export.CheckpointBase(r.Source)
			add(base, "the checkpoint's base model")
			add(imageio.SidecarPath(base), "the base model's sidecar")
		}
		ckpts, _ := filepath.Glob(filepath.Join(filepath.Dir(r.Source), "*.ckpt"))
		for _, ck := range ckpts {
			add(ck, "a checkpoint of the run")
		}
	}
	return in
}

// Outputs are the files an export to out may write: the model, its
// sidecar and its reports.
func Outputs(out string) []File {
	jsonPath, textPath := ReportPaths(out)
	return []File{
		{out, "{out}"}, {imageio.SidecarPath(out), "the sidecar of {out}"},
		{jsonPath, "the JSON report"}, {textPath, "the text report"},
	}
}

// ReplaceError is an output of an export that would replace one of the
// files it reads, or a file of the user's that is no model.
type ReplaceError struct {
	Output File
	// Input says what the replaced file is to the export.
	Input string
}

func (e *ReplaceError) Error() string { return e.Named(setting.Key) }

// Named is the message with the settings it names called name(key).
func (e *ReplaceError) Named(name func(key string) string) string {
	return fmt.Sprintf("%s (%s) would replace %s; choose another output file",
		setting.Advice(e.Output.What).Named(name), e.Output.Path, setting.Advice(e.Input).Named(name))
}

// CheckOutputs refuses, before any work, an export whose outputs
// (Outputs) would replace one of its inputs (Inputs, and extra: other
// files the caller read for it), symbolic links resolved, or whose model
// would replace an existing file that is not an ONNX model, with a
// *ReplaceError, or something other than a regular file. It makes the
// output's folder, as it would otherwise be found missing only after the
// conversion and its check.
func (r Request) CheckOutputs(extra ...File) error {
	inputs := map[string]string{}
	for _, in := range append(r.Inputs(), extra...) {
		if in.Path == "" {
			continue
		}
		if p, err := pathguard.Resolve(in.Path); err == nil {
			inputs[p] = in.What
		}
	}
	for _, o := range Outputs(r.Out) {
		p, err := pathguard.Resolve(o.Path)
		if err != nil {
			return err
		}
		if in, ok := inputs[p]; ok {
			return &ReplaceError{Output: o, Input: in}
		}
		if _, err := atomicfile.Target(o.Path); err != nil {
			return err
		}
	}
	// An existing file where the model goes is replaced only when it is an
	// ONNX model (an earlier export): an image, a list or a note there is
	// the user's, not a model to renew.
	var notONNX *onnx.FormatError
	if _, _, err := onnx.ReadMetadata(r.Out, imageio.ContractKey, imageio.MaxSidecarBytes); errors.As(err, &notONNX) {
		return &ReplaceError{Output: Outputs(r.Out)[0], Input: "an existing file that is not an ONNX model"}
	}
	return os.MkdirAll(filepath.Dir(r.Out), 0o755)
}

// Load loads the float model: a checkpoint's network in its base graph,
// or the model.
func (p *Prepared) Load() (*onnx.Model, error) {
	switch {
	case p.model != nil:
		return p.model, nil
	case p.Checkpoint:
		m, _, err := resolve.LoadCheckpoint(p.Source, p.Base)
		return m, err
	}
	return onnx.Load(p.Source)
}

// refuseQuantized refuses an int8 export of a model that is quantized
// already (a hostile round saw one fail after 73 s of calibration).
func refuseQuantized(m *onnx.Model) error {
	if q := onnx.Quantized(m); len(q) > 0 {
		return &RequestError{Field: "Precision", Err: fmt.Errorf("the model is quantized already (%s): give the float model it was quantized from", q)}
	}
	return nil
}

// Plan returns the export's plan for m, the float model (Load), fed and
// read with settings. The exported model carries settings with the
// Request's classes, label map and ignore label.
func (p *Prepared) Plan(m *onnx.Model, settings imageio.Sidecar) (Plan, error) {
	if p.Precision == INT8 {
		if err := refuseQuantized(m); err != nil {
			return Plan{}, err
		}
	}
	upgraded, opset, err := upgradeFor(m, p.Opset, p.Precision)
	if err != nil {
		return Plan{}, &RequestError{Field: "Opset", Opset: p.Opset, Err: err}
	}
	written := settings.Merge(imageio.Sidecar{Classes: p.ClassNames, LabelMap: p.LabelMap, IgnoreLabel: p.IgnoreLabel})
	if err := written.Validate(); err != nil {
		return Plan{}, &RequestError{Field: "Settings", Err: err}
	}
	ct, err := resolve.ReadContract(p.Source, m, settings)
	if err != nil {
		return Plan{}, err
	}
	ignore := evaluate.DefaultIgnore
	if written.IgnoreLabel != nil {
		ignore = *written.IgnoreLabel
	}
	var pre imageio.Preprocess
	if settings.Preprocess != nil {
		pre = *settings.Preprocess
	}
	return Plan{
		Source: p.Source, Model: m, Upgraded: upgraded, Opset: opset, Contract: ct, Preprocess: pre,
		Overrides: resolve.Overrides(settings), Settings: written, Out: p.Out,
		Convert: Options{Precision: p.Precision, Quant: p.Quant, Calib: p.Calib, CalibImages: p.Calibration, Keep: p.Keep},
		Check: CheckOptions{Images: p.Checks, Source: p.checkFrom, Masks: p.Masks, LabelMap: written.LabelMap, MaskPalette: p.MaskPalette,
			Ignore: ignore, Names: written.Classes, Calibration: p.calibSet},
		MinAgreement: p.MinAgreement,
	}, nil
}
