package evaluate

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
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
	return s.CheckConfusion()
}

// CheckConfusion refuses a confusion folder that is a file or one of the
// image and mask folders (keys images and masks).
func (s Settings) CheckConfusion() error {
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
	return nil
}

// CheckConfusionHoldsNoData refuses a confusion folder that holds set's
// images or masks (data/images/val, say), which CheckConfusion's look at
// the settings' own folders does not see.
func (s Settings) CheckConfusionHoldsNoData(set *datalayout.Set) error {
	if s.Confusion == "" || set == nil {
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
	var ce *ConfusionDirError
	if err := CheckConfusionDir(s.Confusion, folders...); errors.As(err, &ce) && ce.Input >= 0 {
		return setting.Messagef("{confusion} %s holds {data}'s files; choose a folder of its own", s.Confusion)
	}
	return nil
}

// Options are the scoring options of s (Model, Images and Masks are
// Request.Plan's to fill).
func (s Settings) Options() (SetupOptions, error) {
	o := SetupOptions{SizeThreshold: s.SizeThreshold}
	if s.given("ignore") {
		ignore := s.Ignore
		o.Ignore = &ignore
	}
	if s.ClassNames != "" {
		o.ClassNames = strings.Split(s.ClassNames, ",")
	}
	var err error
	if o.SizeClasses, err = listflag.Ints(s.SizeClasses); err != nil {
		return o, &setting.Error{Setting: "size_classes", Err: err}
	}
	return o, nil
}
