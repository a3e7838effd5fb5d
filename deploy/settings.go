package deploy

import (
	"fmt"
	"strings"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/resolve"
)

// Settings are an export as its user writes it (a CLI's flags, a config
// file), keyed by the json names; Request turns them into a Request.
type Settings struct {
	Checkpoint string `json:"checkpoint"`
	Model      string `json:"model"`
	Out        string `json:"out"`
	Precision  string `json:"precision"`
	Opset      int    `json:"opset"`
	// Calibrate is int8's folder of images or of labelled data (its
	// training split's images, opened with Layout).
	Calibrate          string  `json:"calibrate"`
	CalibrateCount     int     `json:"calibrate_count"`
	CalibrateMinImages int     `json:"calibrate_min_images"`
	CalibrateMethod    string  `json:"calibrate_method"`
	Percentile         float64 `json:"percentile"`
	ActivationType     string  `json:"activation_type"`
	PerTensor          bool    `json:"per_tensor"`
	ReduceRange        bool    `json:"reduce_range"`
	QuantizeOutputs    bool    `json:"quantize_outputs"`
	FloatBias          bool    `json:"float_bias"`
	KeepFloat          string  `json:"keep_float"`
	CheckImages        string  `json:"check_images"`
	CheckMasks         string  `json:"check_masks"`
	CheckCount         int     `json:"check_count"`
	// MinAgreement is used where Given says so; else DefaultMinAgreement.
	MinAgreement float64 `json:"min_agreement"`
	// Ignore (where given) and ClassNames (comma-separated) replace the
	// model's own.
	Ignore     int    `json:"ignore"`
	ClassNames string `json:"class_names"`
	// Given says which settings (by key) the user gave rather than left
	// at their defaults: a setting of another precision is refused only
	// when given.
	Given func(key string) bool `json:"-"`
}

// DefaultSettings are an fp32 export's defaults.
func DefaultSettings() Settings {
	return Settings{Precision: "fp32", CalibrateCount: 64, CalibrateMinImages: MinCalibrationImages, CalibrateMethod: "minmax",
		Percentile: quantize.DefaultPercentile, ActivationType: "uint8", CheckCount: 32, Ignore: evaluate.DefaultIgnore}
}

// The ranges of Settings' numbers.
var (
	CountRange        = setting.Range{Min: 1, Max: 1 << 20, Zero: true, Why: "0 takes every image"}
	PercentileRange   = setting.Range{Min: 0, MinOpen: true, Max: 100}
	MinAgreementRange = setting.Range{Min: 0, Max: 1, Why: "a share of pixels"}
)

// int8Only are the settings (by key) of an int8 export alone, the data
// layout of its calibration folder included.
var int8Only = []string{"calibrate", "calibrate_method", "percentile", "activation_type", "per_tensor", "reduce_range",
	"quantize_outputs", "float_bias", "calibrate_count", "calibrate_min_images", "format", "split"}

// Validate checks the numbers' ranges (a *setting.Error), before any work.
func (s Settings) Validate() error {
	for _, n := range []struct {
		key   string
		v     float64
		isInt bool
		r     setting.Range
	}{
		{"calibrate_count", float64(s.CalibrateCount), true, CountRange},
		{"check_count", float64(s.CheckCount), true, CountRange},
		{"percentile", s.Percentile, false, PercentileRange},
		{"min_agreement", s.MinAgreement, false, MinAgreementRange},
		{"ignore", float64(s.Ignore), true, imageio.LabelRange},
	} {
		if err := n.r.Check(n.key, n.v, n.isInt); err != nil {
			return err
		}
	}
	return nil
}

func (s Settings) given(key string) bool { return s.Given != nil && s.Given(key) }

// Request is the Request s describes, its settings that go together
// checked (naming them by {key}), and int8's calibration images listed
// with layout; noteSet is told of a data folder opened for them.
func (s Settings) Request(layout datalayout.Options, noteSet func(*datalayout.Set)) (*Request, error) {
	r := &Request{Out: s.Out, CheckImages: s.CheckImages, CheckMasks: s.CheckMasks, CheckCount: s.CheckCount,
		Keep: listflag.Split(s.KeepFloat), Opset: int64(s.Opset)}
	switch {
	case s.Checkpoint != "":
		r.Source, r.Checkpoint, r.Base = s.Checkpoint, true, s.Model
	case s.Model != "":
		r.Source, r.Checkpoint = s.Model, resolve.IsCheckpoint(s.Model)
	default:
		return nil, ErrNoSource
	}
	var err error
	if r.Precision, err = ParsePrecision(s.Precision); err != nil {
		return nil, &setting.Error{Setting: "precision", Err: err}
	}
	if err := s.checkTogether(r.Precision); err != nil {
		return nil, err
	}
	r.MinAgreement = DefaultMinAgreement[r.Precision]
	if s.given("min_agreement") {
		r.MinAgreement = s.MinAgreement
	}
	if s.given("ignore") {
		r.IgnoreLabel = &s.Ignore
	}
	if s.ClassNames != "" {
		r.ClassNames = strings.Split(s.ClassNames, ",")
	}
	if r.Precision != INT8 {
		return r, nil
	}
	return r, s.calibration(r, layout, noteSet)
}

// ErrNoSource is a Settings with neither a checkpoint nor a model.
var ErrNoSource = setting.Messagef("give {checkpoint} C or {model} M (the model to export)")

// checkTogether refuses settings given without the precision or the
// other setting they are for.
func (s Settings) checkTogether(p Precision) error {
	if p != INT8 {
		for _, k := range int8Only {
			if s.given(k) {
				return setting.Messagef("{"+k+"} is for {precision} int8 (this export is %s)", p)
			}
		}
	}
	switch {
	case s.given("keep_float") && p == FP32:
		return setting.Messagef("{keep_float} is for {precision} fp16 or int8")
	case s.given("check_masks") && !s.given("check_images"):
		return setting.Messagef("{check_masks} needs {check_images} (the images the masks belong to)")
	case s.given("mask_palette") && !s.given("check_masks"):
		return setting.Messagef("{mask_palette} is for reading {check_masks}")
	}
	return nil
}

// calibration sets int8's calibration images and quantizer settings.
func (s Settings) calibration(r *Request, layout datalayout.Options, noteSet func(*datalayout.Set)) error {
	if s.Calibrate == "" {
		return setting.Messagef("{precision} int8 needs {calibrate} DIR: a folder of images like those the model will segment, to measure its activations' ranges on")
	}
	imgs, err := CalibrationImages(s.Calibrate, layout, s.given("format") || s.given("split"), noteSet)
	if err != nil {
		return err
	}
	r.CalibrationDir, r.CalibrationImages = s.Calibrate, imgs
	r.CalibrationCount, r.MinCalibration = s.CalibrateCount, s.CalibrateMinImages
	method, err := quantize.ParseMethod(s.CalibrateMethod)
	if err != nil {
		return &setting.Error{Setting: "calibrate_method", Err: err}
	}
	if s.given("percentile") && method != quantize.Percentile {
		return setting.Messagef("{percentile} is for {calibrate_method} percentile")
	}
	act, err := quantize.ParseQType(s.ActivationType)
	if err != nil {
		return &setting.Error{Setting: "activation_type", Err: err}
	}
	r.Calib = quantize.CalibOptions{Method: method, Percentile: s.Percentile}
	r.Quant = quantize.Options{Activations: act, PerTensor: s.PerTensor, ReduceRange: s.ReduceRange,
		Keep: r.Keep, QuantizeOutputs: s.QuantizeOutputs, FloatBias: s.FloatBias}
	return nil
}

// CalibrationImages are the images of the calibration folder dir: those
// directly in it, or, when it holds none (or asData), the images of a
// split of the data set it holds (layout's split, default train), of
// which noteSet is told. A folder that cannot be used is a
// *RequestError of CalibrationDir.
func CalibrationImages(dir string, layout datalayout.Options, asData bool, noteSet func(*datalayout.Set)) ([]string, error) {
	files, err := imageio.ListImages(dir)
	_, notData := datalayout.Detect(dir)
	if !asData && !(err == nil && len(files) == 0 && notData == nil) {
		imgs, err := ListImageDir(dir)
		if err != nil {
			return nil, &RequestError{Field: "CalibrationDir", Err: err}
		}
		return imgs, nil
	}
	set, err := datalayout.OpenDefault(dir, layout, "train")
	if err != nil {
		return nil, &RequestError{Field: "CalibrationDir", Err: err}
	}
	noteSet(set)
	if len(set.Samples) == 0 {
		return nil, &RequestError{Field: "CalibrationDir", Path: dir, Err: fmt.Errorf("%s", set.Summary())}
	}
	return set.Images(), nil
}
