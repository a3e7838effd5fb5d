package evaluate

import (
	"encoding/json"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
)

// DefaultIgnore is the mask label left out of scoring when neither the
// caller nor the model's settings name one.
const DefaultIgnore = 255

// SetupOptions are what an evaluation is scored with beyond the model and
// its settings.
type SetupOptions struct {
	// Model is the model's file, whose SHA-256 identifies it.
	Model string
	// Images and Masks describe the data, as the partial records it.
	Images, Masks string
	// Ignore is the mask label left out of scoring (nil: the settings',
	// else DefaultIgnore).
	Ignore *int
	// ClassNames name the classes in the report (nil: the settings').
	ClassNames []string
	// SizeClasses are the classes whose pixel fraction is an image's
	// object size; with them the report scores images with small and
	// large objects apart, at SizeThreshold (0: the mean object size).
	SizeClasses   []int
	SizeThreshold float64
	// MaskPalette reads RGB colour masks (nil: label masks only).
	MaskPalette imageio.Palette
}

// classNamesAre is how a *ClassNamesError speaks of the class names: by
// their setting's key (setting.Advice).
const classNamesAre = "{class_names} names"

// ClassNamesError is class names that do not fit the model's class count.
type ClassNamesError struct {
	Model string
	Err   error
}

func (e *ClassNamesError) Error() string { return e.Named(setting.Key) }

// Named is the message with its setting called name(key); Err is
// contract's wording around classNamesAre, which holds no other braces.
func (e *ClassNamesError) Named(name func(key string) string) string {
	return e.Model + ": " + setting.Advice(e.Err.Error()).Named(name)
}

func (e *ClassNamesError) Unwrap() error { return e.Err }

// NewSetup is the Setup of evaluating seg, opened with settings (its
// preprocessing and label map), as o says: the class count is the
// model's (at least 2 when its contract does not say), and class names
// must match it (a *ClassNamesError).
func NewSetup(seg *inference.Segmenter, settings imageio.Sidecar, o SetupOptions) (Setup, error) {
	ignore := DefaultIgnore
	switch {
	case o.Ignore != nil:
		ignore = *o.Ignore
	case settings.IgnoreLabel != nil:
		ignore = *settings.IgnoreLabel
	}
	names := o.ClassNames
	if names == nil {
		names = settings.Classes
	}
	classes := seg.Contract.Classes
	if classes == 0 {
		classes = max(len(names), 2)
	}
	if err := seg.Contract.CheckClasses(len(names), classNamesAre); err != nil {
		return Setup{}, &ClassNamesError{Model: o.Model, Err: err}
	}
	digest, err := regfile.SHA256(o.Model)
	if err != nil {
		return Setup{}, err
	}
	pre, err := canonicalJSON(settings.Preprocess)
	if err != nil {
		return Setup{}, err
	}
	run := Setup{Model: o.Model, ModelSHA256: digest, Images: o.Images, Masks: o.Masks,
		Classes: classes, Ignore: ignore, ClassNames: names, Preprocess: pre,
		SizeClasses: o.SizeClasses, SizeThreshold: o.SizeThreshold}
	if settings.LabelMap != nil {
		run.LabelMap = settings.LabelMap.String()
	}
	if o.MaskPalette != nil {
		// Shards that read colours differently do not merge.
		if run.MaskPalette, err = json.Marshal(o.MaskPalette); err != nil {
			return Setup{}, err
		}
	}
	if run.ClassNames == nil {
		run.ClassNames = []string{}
	}
	if run.SizeClasses == nil {
		run.SizeClasses = []int{}
	}
	return run, nil
}

// canonicalJSON is v's JSON with object keys sorted.
func canonicalJSON(v any) (json.RawMessage, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}
