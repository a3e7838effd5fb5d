package deploy

import (
	"errors"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
)

// Sources are what an export reads beside its Settings: the layout of
// int8's calibration folder where it holds labelled data, how the check
// masks read (a label map's spec and a colour masks' palette file, which
// replace the model's own), other files the outputs must not replace (a
// preprocessing file, say) and where notes go (the data folder taken,
// blank calibration images).
type Sources struct {
	Layout                datalayout.Layout
	LabelMap, MaskPalette string
	Keep                  []File
	Notes                 datalayout.Notes
}

// Prepare is the export s describes with in: made a Request, its images
// chosen and screened (Prepare) and its outputs checked, before any model
// is loaded. The user's mistakes found before any work are usage errors
// (setting.Usage): a number out of range, neither a checkpoint nor a
// model (ErrNoSource), a layout, label map or palette that cannot be
// used, a negative minimum of calibration images. An output that would
// replace an input is a *setting.Error of out.
func (s Settings) Prepare(in Sources) (*Prepared, error) {
	if err := s.Validate(); err != nil {
		return nil, setting.Usage(err)
	}
	var opt datalayout.Options
	if p, _ := ParsePrecision(s.Precision); p == INT8 { // the calibration folder's layout
		var err error
		if opt, err = in.Layout.Options(); err != nil {
			return nil, err
		}
	}
	r, err := s.Request(opt, func(set *datalayout.Set) { in.Notes.Set(set, in.LabelMap != "") })
	if errors.Is(err, ErrNoSource) {
		return nil, setting.Usage(err)
	} else if err != nil {
		return nil, err
	}
	masks, _, err := datalayout.ReadMasks(in.LabelMap, in.MaskPalette)
	if err != nil {
		return nil, err
	}
	r.LabelMap, r.MaskPalette = masks.Map, masks.Palette
	p, err := Prepare(*r)
	if errors.Is(err, ErrNegativeMinimum) {
		return nil, setting.Usage(err)
	} else if err != nil {
		return nil, err
	}
	if p.Warning != "" {
		in.Notes.Printf("warning: %s", p.Warning)
	}
	if err := r.CheckOutputs(in.Keep...); err != nil {
		return nil, &setting.Error{Setting: "out", Value: r.Out, Err: err}
	}
	return p, nil
}
