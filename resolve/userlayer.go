package resolve

import (
	"io"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// UserLayer are the settings a user sets field by field over a model's
// own (ModelSettings' override): preprocessing and output fields, and the
// shorthands that imply others. Errors name them by key.
type UserLayer struct {
	Pre  imageio.Preprocess
	Out  imageio.OutputSpec
	Size string // HxW: the fixed input size
	BGR  bool   // channels in BGR order
	NHWC bool   // NHWC input tensors
	// ThresholdGiven says Out.Threshold was set: its zero, which stands
	// for the default, is then refused.
	ThresholdGiven bool
}

// Sidecar is o as a layer of settings: what it sets, with Size and
// ScaleFactor implying their resize policy where Resize is not set.
func (o UserLayer) Sidecar() (imageio.Sidecar, error) {
	p, out := o.Pre, o.Out
	if o.Size != "" {
		h, w, err := imageio.ParseSize(o.Size)
		if err != nil {
			return imageio.Sidecar{}, setting.Messagef("{size}: %w", err)
		}
		p.Height, p.Width = h, w
	}
	switch {
	case p.Resize != "":
	case p.ScaleFactor != 0:
		p.Resize = imageio.ResizeScale
	case o.Size != "":
		p.Resize = imageio.ResizeStretch
	}
	if o.BGR {
		p.ChannelOrder = imageio.BGR
	}
	if o.NHWC {
		p.Layout = imageio.NHWC
	}
	if err := out.Validate(); err != nil {
		return imageio.Sidecar{}, setting.Messagef("{output_layout}/{threshold}: %w", err)
	}
	if o.ThresholdGiven && !(out.Threshold > 0) {
		return imageio.Sidecar{}, setting.Messagef("{threshold} %v: want a probability in (0, 1)", out.Threshold)
	}
	s := imageio.Sidecar{Preprocess: &p}
	if out != (imageio.OutputSpec{}) { // no empty output spec in the settings a model is exported with
		s.Output = &out
	}
	return s, nil
}

// Preprocessing is a user's layer over a model's own settings: a settings
// file and fields (UserLayer). Given are the ones the user set, as the
// user names them (a CLI: their flags), in order.
type Preprocessing struct {
	File string
	UserLayer
	Given []string
}

// Settings are the settings to run the model at modelPath with: its own,
// then p's file and fields (ModelSettings). Where they come from goes to
// notes, a model's unusable embedded settings to warnings (WriteNotices,
// settings called name(key)).
func (p Preprocessing) Settings(modelPath string, notes, warnings io.Writer, name func(key string) string) (Settings, error) {
	flags, err := p.Sidecar()
	if err != nil {
		return Settings{}, err
	}
	s, err := ModelSettings(modelPath, p.File, flags)
	if err != nil {
		return Settings{}, err
	}
	s.WriteNotices(notes, warnings, "segtune: ", modelPath, len(p.Given) > 0, name)
	return s, nil
}
