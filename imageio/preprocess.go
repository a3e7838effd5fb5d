package imageio

import (
	"fmt"
	"math"
	"strings"
)

// ResizePolicy says how an image is brought to the model's input size.
type ResizePolicy string

// Resize policies.
const (
	// ResizeStretch scales both axes independently to Height×Width.
	ResizeStretch ResizePolicy = "stretch"
	// ResizeLetterbox scales keeping the aspect ratio so the image fits in
	// Height×Width, then pads with PadColor ("pad" is accepted as an alias).
	ResizeLetterbox ResizePolicy = "letterbox"
	// ResizeNone keeps the native size (for models with dynamic H and W).
	ResizeNone ResizePolicy = "none"
	// ResizeScale multiplies the native size by ScaleFactor, then rounds up
	// to MultipleOf and adds one if PlusOne (DeepLab's k·stride+1 sizes).
	ResizeScale ResizePolicy = "scale"
)

// Interpolation selects the resampling filter for images.
type Interpolation string

// Interpolation filters. Bilinear uses half-pixel centres (like OpenCV's
// INTER_LINEAR and PyTorch's align_corners=false) and does not low-pass
// before shrinking.
const (
	Nearest  Interpolation = "nearest"
	Bilinear Interpolation = "bilinear"
)

// ChannelOrder is the order of colour channels in the tensor.
type ChannelOrder string

// Channel orders.
const (
	RGB ChannelOrder = "RGB"
	BGR ChannelOrder = "BGR"
)

// Layout is the tensor memory layout of one image (batch dimension N = 1
// per slot).
type Layout string

// Tensor layouts.
const (
	NCHW Layout = "NCHW"
	NHWC Layout = "NHWC"
)

// Value ranges on which Mean and Std are expressed.
const (
	RangeUnit = "0..1"   // pixel/255, torchvision style
	RangeByte = "0..255" // raw byte values, Caffe style
)

// Preprocess describes, as data, how a decoded image becomes a float32
// tensor. The zero value means: native size, bilinear, RGB, NCHW, raw 0..255
// values.
//
// Normalisation is either Mean/Std (per channel, listed in the tensor's
// channel order, on values in MeanStdRange) or ValueScale/ValueOffset
// (x*ValueScale + ValueOffset on raw 0..255 values), never both. For the
// DeepLabV3+ person model: value_scale 1/127.5 = 0.00784313725490196,
// value_offset -1.
type Preprocess struct {
	// Height and Width of the tensor for stretch and letterbox.
	Height int `json:"height,omitempty"`
	Width  int `json:"width,omitempty"`
	// Resize policy; empty means stretch when Height/Width are set, else none.
	Resize ResizePolicy `json:"resize,omitempty"`
	// ScaleFactor multiplies the native size for the scale policy.
	ScaleFactor float64 `json:"scale_factor,omitempty"`
	// MultipleOf rounds scale-policy sizes up to a multiple of it (0 = off).
	MultipleOf int `json:"multiple_of,omitempty"`
	// PlusOne adds 1 to scale-policy sizes after rounding: 360×480 with
	// factor 2, multiple_of 8 and plus_one gives 721×961.
	PlusOne bool `json:"plus_one,omitempty"`
	// PadColor fills letterbox borders, as 0..255 RGB before normalisation.
	PadColor [3]uint8 `json:"pad_color,omitzero"`
	// PadPosition is "center" (default) or "top_left" (pads right/bottom).
	PadPosition string `json:"pad_position,omitempty"`
	// Interpolation is "bilinear" (default) or "nearest".
	Interpolation Interpolation `json:"interpolation,omitempty"`
	// ChannelOrder is "RGB" (default) or "BGR".
	ChannelOrder ChannelOrder `json:"channel_order,omitempty"`
	// Layout is "NCHW" (default) or "NHWC".
	Layout Layout `json:"layout,omitempty"`
	// Mean and Std: y = (x - mean[c]) / std[c], x in MeanStdRange.
	Mean []float64 `json:"mean,omitempty"`
	Std  []float64 `json:"std,omitempty"`
	// MeanStdRange is "0..1" (default) or "0..255".
	MeanStdRange string `json:"mean_std_range,omitempty"`
	// ValueScale and ValueOffset: y = x*scale + offset with x in 0..255.
	// ValueScale 0 means 1 (a zero scale would erase the image).
	ValueScale  float64 `json:"value_scale,omitempty"`
	ValueOffset float64 `json:"value_offset,omitempty"`
}

// Channels is the number of channels in every tensor produced (RGB).
const Channels = 3

// plan is a validated, normalised Preprocess, cheap to build per call.
type plan struct {
	resize   ResizePolicy
	bilinear bool
	topLeft  bool
	nhwc     bool
	// slot[c] is the tensor channel of source channel c (R, G, B).
	slot [3]int
	// Tensor value of source channel c with byte value v: v*mul[c] + add[c].
	mul, add [3]float32
}

// Validate reports whether p is consistent, with an error naming the
// offending field.
func (p *Preprocess) Validate() error {
	_, err := p.plan()
	return err
}

func (p *Preprocess) plan() (plan, error) {
	var pl plan
	pl.resize = p.Resize
	switch strings.ToLower(string(p.Resize)) {
	case "":
		pl.resize = ResizeNone
		if p.Height != 0 || p.Width != 0 {
			pl.resize = ResizeStretch
		}
	case "stretch":
		pl.resize = ResizeStretch
	case "letterbox", "pad":
		pl.resize = ResizeLetterbox
	case "none":
		pl.resize = ResizeNone
	case "scale":
		pl.resize = ResizeScale
	default:
		return pl, fmt.Errorf("preprocess: unknown resize %q (want stretch, letterbox, none or scale)", p.Resize)
	}
	switch pl.resize {
	case ResizeStretch, ResizeLetterbox:
		if p.Height <= 0 || p.Width <= 0 {
			return pl, fmt.Errorf("preprocess: resize %s needs height and width > 0, have %dx%d", pl.resize, p.Height, p.Width)
		}
	case ResizeScale:
		if !(p.ScaleFactor > 0) || math.IsInf(p.ScaleFactor, 0) || p.ScaleFactor > 64 {
			return pl, fmt.Errorf("preprocess: resize scale needs 0 < scale_factor <= 64, have %v", p.ScaleFactor)
		}
	}
	if p.Height < 0 || p.Width < 0 {
		return pl, fmt.Errorf("preprocess: negative size %dx%d", p.Height, p.Width)
	}
	if p.MultipleOf < 0 {
		return pl, fmt.Errorf("preprocess: negative multiple_of %d", p.MultipleOf)
	}
	switch strings.ToLower(p.PadPosition) {
	case "", "center", "centre":
	case "top_left":
		pl.topLeft = true
	default:
		return pl, fmt.Errorf("preprocess: unknown pad_position %q (want center or top_left)", p.PadPosition)
	}
	switch strings.ToLower(string(p.Interpolation)) {
	case "", "bilinear", "linear":
		pl.bilinear = true
	case "nearest":
	default:
		return pl, fmt.Errorf("preprocess: unknown interpolation %q (want bilinear or nearest)", p.Interpolation)
	}
	switch strings.ToUpper(string(p.ChannelOrder)) {
	case "", "RGB":
		pl.slot = [3]int{0, 1, 2}
	case "BGR":
		pl.slot = [3]int{2, 1, 0}
	default:
		return pl, fmt.Errorf("preprocess: unknown channel_order %q (want RGB or BGR)", p.ChannelOrder)
	}
	switch strings.ToUpper(string(p.Layout)) {
	case "", "NCHW":
	case "NHWC":
		pl.nhwc = true
	default:
		return pl, fmt.Errorf("preprocess: unknown layout %q (want NCHW or NHWC)", p.Layout)
	}
	if err := p.normalisation(&pl); err != nil {
		return pl, err
	}
	return pl, nil
}

func (p *Preprocess) normalisation(pl *plan) error {
	meanStd := len(p.Mean) > 0 || len(p.Std) > 0 || p.MeanStdRange != ""
	if meanStd && (p.ValueScale != 0 || p.ValueOffset != 0) {
		return fmt.Errorf("preprocess: set either mean/std or value_scale/value_offset, not both")
	}
	if !meanStd {
		s := p.ValueScale
		if s == 0 {
			s = 1
		}
		if !finite(s) || !finite(p.ValueOffset) {
			return fmt.Errorf("preprocess: value_scale %v and value_offset %v must be finite", p.ValueScale, p.ValueOffset)
		}
		pl.mul = [3]float32{float32(s), float32(s), float32(s)}
		o := float32(p.ValueOffset)
		pl.add = [3]float32{o, o, o}
		return nil
	}
	mean, std := p.Mean, p.Std
	if len(mean) == 0 {
		mean = []float64{0, 0, 0}
	}
	if len(std) == 0 {
		std = []float64{1, 1, 1}
	}
	if len(mean) != Channels || len(std) != Channels {
		return fmt.Errorf("preprocess: mean and std need %d values each, have %d and %d", Channels, len(p.Mean), len(p.Std))
	}
	unit := 1.0 / 255
	switch p.MeanStdRange {
	case "", RangeUnit:
	case RangeByte:
		unit = 1
	default:
		return fmt.Errorf("preprocess: unknown mean_std_range %q (want %q or %q)", p.MeanStdRange, RangeUnit, RangeByte)
	}
	// Mean and Std are in tensor channel order; fold them onto source
	// channels so the hot loop is a single multiply-add per value.
	for c := 0; c < Channels; c++ {
		t := pl.slot[c]
		if !(std[t] > 0) || !finite(std[t]) || !finite(mean[t]) {
			return fmt.Errorf("preprocess: channel %d needs finite mean and std > 0, have mean %v std %v", t, mean[t], std[t])
		}
		pl.mul[c] = float32(unit / std[t])
		pl.add[c] = float32(-mean[t] / std[t])
	}
	return nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
