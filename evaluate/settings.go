package evaluate

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/resolve"
)

// Settings are an evaluation as its user writes it (segtune eval's
// flags), keyed by the json names: the model, its labelled images
// (Images and Masks, or the data set Data), how they are scored and where
// the confusion matrix and a shard's partial file go.
type Settings struct {
	Model         string  `json:"model"`
	Images        string  `json:"images"`
	Masks         string  `json:"masks"`
	Data          string  `json:"data"`
	Ignore        int     `json:"ignore"`
	ClassNames    string  `json:"class_names"`
	Batch         int     `json:"batch"`
	SizeClasses   string  `json:"size_classes"`
	SizeThreshold float64 `json:"size_threshold"`
	Confusion     string  `json:"confusion"`
	Partial       string  `json:"partial"`
	// Given says which settings (by key) the user gave: Ignore replaces
	// the model's own only then.
	Given func(key string) bool `json:"-"`
}

// DefaultSettings are eval's defaults.
func DefaultSettings() Settings { return Settings{Ignore: DefaultIgnore, Batch: 1} }

func (s Settings) given(key string) bool { return s.Given != nil && s.Given(key) }

// Validate checks, before any work, that the data is given one way
// (Data, or Images and Masks), that Partial is a path or URL, and that
// the confusion folder is no input folder nor a file.
func (s Settings) Validate() error {
	if s.given("data") && (s.given("images") || s.given("masks")) {
		return setting.Messagef("give {data}, or {images} and {masks}, not both")
	}
	if _, err := storage.Parse(s.Partial); s.Partial != "" && err != nil {
		return &setting.Error{Setting: "partial", Value: s.Partial, Err: err}
	}
	err := setting.CheckAll(map[string]setting.Range{"batch": inference.BatchRange, "ignore": imageio.LabelRange, "size_threshold": metrics.SizeThresholdRange},
		[]setting.Number{{Key: "batch", V: float64(s.Batch), Int: true}, {Key: "ignore", V: float64(s.Ignore), Int: true}, {Key: "size_threshold", V: s.SizeThreshold}})
	if err != nil {
		return err
	}
	return s.CheckConfusion(nil)
}

// Required are the settings (by key) an evaluation cannot go without:
// the model, and the data set or else the image and mask folders.
func (s Settings) Required() []string {
	if s.Data != "" {
		return []string{"model"}
	}
	return []string{"model", "images", "masks"}
}

// Open checks s (Validate) and opens its labelled data with open: a data
// set's folder becomes Images and Masks, and a confusion folder among the
// data set's folders is refused. What s gets wrong is a usage error (setting.Usage); the
// caller closes the data.
func (s *Settings) Open(open Openers) (*Labelled, error) {
	if err := s.Validate(); err != nil {
		return nil, setting.Usage(err)
	}
	l, err := OpenLabelled(s.Data, s.Images, s.Masks, open)
	if err != nil || l.Set == nil {
		return l, err
	}
	s.Images, s.Masks = l.Set.Root, l.Set.Root
	if err := s.CheckConfusion(l.Set); err != nil {
		l.Close()
		return nil, setting.Usage(err)
	}
	return l, nil
}

// CheckConfusion refuses a confusion folder that is a file or one of the
// image and mask folders (keys images and masks), or that holds the
// images or masks of set, the data set read (data/images/val, say).
func (s Settings) CheckConfusion(set *datalayout.Set) error {
	if s.Confusion == "" {
		return nil
	}
	var ce *ConfusionDirError
	err := CheckConfusionDir(s.Confusion, s.Images, s.Masks)
	if errors.As(err, &ce) && ce.Input >= 0 {
		return setting.Messagef("{confusion} %s is the {"+[]string{"images", "masks"}[ce.Input]+"} folder; choose a folder of its own", s.Confusion)
	} else if err != nil {
		return setting.Messagef("{confusion} %w", err)
	}
	if set == nil {
		return nil
	}
	var folders []string
	seen := map[string]bool{}
	for _, x := range set.Samples {
		for _, f := range []string{filepath.Dir(x.Image), filepath.Dir(x.Mask)} {
			if !seen[f] {
				seen[f] = true
				folders = append(folders, f)
			}
		}
	}
	if err := CheckConfusionDir(s.Confusion, folders...); errors.As(err, &ce) && ce.Input >= 0 {
		return setting.Messagef("{confusion} %s holds {data}'s files; choose a folder of its own", s.Confusion)
	}
	return nil
}

// Request is the evaluation s describes of the model, whose settings are
// model, with masks read as masks says (its label map replacing the
// model's); the caller adds the images, the shard and how to open the
// model. A checkpoint's size threshold applies where s gives none.
func (s Settings) Request(model imageio.Sidecar, masks imageio.MaskOptions) (Request, error) {
	r := Request{Model: s.Model, Settings: model, Batch: s.Batch, Partial: s.Partial != ""}
	if masks.Map != nil {
		r.Settings.LabelMap = masks.Map
	}
	o := &r.Options
	o.SizeThreshold, o.MaskPalette = s.SizeThreshold, masks.Palette
	if s.given("ignore") {
		ignore := s.Ignore
		o.Ignore = &ignore
	}
	if s.ClassNames != "" {
		o.ClassNames = strings.Split(s.ClassNames, ",")
	}
	var err error
	if o.SizeClasses, err = listflag.Ints(s.SizeClasses); err != nil {
		return r, &setting.Error{Setting: "size_classes", Err: err}
	}
	if o.SizeThreshold == 0 && len(o.SizeClasses) > 0 && resolve.IsCheckpoint(s.Model) {
		o.SizeThreshold = resolve.CheckpointSizeThreshold(s.Model)
	}
	return r, nil
}
