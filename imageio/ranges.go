package imageio

import (
	"math"

	"github.com/segtune/segtune/internal/setting"
)

// The valid numbers of Preprocess and OverlayOptions as a user gives
// them; CheckRanges and OverlayOptions.Validate refuse others by their
// config key.
var (
	ScaleFactorRange  = setting.Range{Min: 0, MinOpen: true, Max: 64, Zero: true}
	MultipleOfRange   = setting.Range{Min: 0, Max: 1 << 12}
	FiniteRange       = setting.Range{Min: math.Inf(-1), Max: math.Inf(1)} // value_scale, value_offset
	MeanRange         = setting.Range{Min: math.Inf(-1), Max: math.Inf(1), List: true}
	StdRange          = setting.Range{Min: 0, MinOpen: true, Max: math.Inf(1), List: true}
	OverlayAlphaRange = setting.Range{Min: 0, Max: 1, Why: "the overlay opacity"}
	// LabelRange is a mask label as a user names one (an ignore label).
	LabelRange = setting.Range{Min: 0, Max: MaxLabel, Why: "mask labels are 0..65535"}
)

// CheckRanges refuses a number of p out of its range (a NaN, an
// infinity, a zero std…) with a *setting.Error keyed as p's JSON is
// (scale_factor, multiple_of, value_scale, value_offset, mean, std).
func (p *Preprocess) CheckRanges() error {
	if err := ScaleFactorRange.Check("scale_factor", p.ScaleFactor, false); err != nil {
		return err
	}
	if err := MultipleOfRange.Check("multiple_of", float64(p.MultipleOf), true); err != nil {
		return err
	}
	if err := FiniteRange.Check("value_scale", p.ValueScale, false); err != nil {
		return err
	}
	if err := FiniteRange.Check("value_offset", p.ValueOffset, false); err != nil {
		return err
	}
	for _, list := range []struct {
		key  string
		vals []float64
		r    setting.Range
	}{{"mean", p.Mean, MeanRange}, {"std", p.Std, StdRange}} {
		for _, v := range list.vals {
			if err := list.r.Check(list.key, v, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate refuses an Alpha outside [0, 1] (keyed overlay_alpha).
func (o OverlayOptions) Validate() error {
	return OverlayAlphaRange.Check("overlay_alpha", o.Alpha, false)
}
