package preprocsearch

import (
	"errors"
	"fmt"
	"os"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
)

// Config is a search as its user asks for it (segtune info
// --find-preprocessing), keyed by the json names: the labelled images
// (Images and Masks, or the data set Data), how many to score, and
// whether the choice goes into the model's sidecar.
type Config struct {
	Find         bool   `json:"find_preprocessing"`
	Images       string `json:"images"`
	Masks        string `json:"masks"`
	Data         string `json:"data"`
	Ignore       int    `json:"ignore"`
	Sample       int    `json:"sample"`
	WriteSidecar bool   `json:"write_sidecar"`
	Force        bool   `json:"force"`
	// Given says which settings (by key) the user gave: those of the
	// search are refused without Find.
	Given func(key string) bool `json:"-"`
}

// DefaultConfig is no search, with a search's defaults.
func DefaultConfig() Config { return Config{Ignore: evaluate.DefaultIgnore, Sample: 16} }

// searchOnly are the settings (by key) that mean nothing without Find,
// the reading of masks included.
var searchOnly = []string{"images", "masks", "data", "label_map", "mask_palette", "sample", "write_sidecar", "force"}

func (c Config) given(key string) bool { return c.Given != nil && c.Given(key) }

// Validate refuses the search's settings given without Find, and its
// data given twice or not at all, before any work (naming them by key).
func (c Config) Validate() error {
	if !c.Find {
		for _, k := range searchOnly {
			if c.given(k) {
				return setting.Messagef("{" + k + "} goes with {find_preprocessing}")
			}
		}
		return nil
	}
	switch {
	case c.given("data") && (c.given("images") || c.given("masks")):
		return setting.Messagef("{find_preprocessing}: give {data}, or {images} and {masks}, not both")
	case !c.given("data") && (c.Images == "" || c.Masks == ""):
		return setting.Messagef("{find_preprocessing} needs labelled images: {images} DIR and {masks} DIR, or {data} DIR")
	case c.Sample < 0:
		return setting.Errorf("sample", fmt.Sprint(c.Sample), "want a number of images, or 0 for all")
	case c.Force && !c.WriteSidecar:
		return setting.Messagef("{force} goes with {write_sidecar}")
	}
	return nil
}

// RefuseExistingSidecar refuses to write the sidecar at path over an
// existing file unless Force (an error of write_sidecar).
func (c Config) RefuseExistingSidecar(path string) error {
	if c.Force {
		return nil
	}
	if _, err := os.Lstat(path); err == nil {
		return &setting.Error{Setting: "write_sidecar", Err: setting.Messagef("%s exists; {force} replaces it", path)}
	} else if !errors.Is(err, os.ErrNotExist) {
		return &setting.Error{Setting: "write_sidecar", Err: err}
	}
	return nil
}

// SaveSidecar writes own, the model's own settings, with the chosen
// preprocessing into the sidecar at path, atomically; not over an
// existing file unless Force, looked at again as another process may
// have written one meanwhile.
func (c Config) SaveSidecar(path string, own imageio.Sidecar, chosen Score) error {
	if err := c.RefuseExistingSidecar(path); err != nil {
		return err
	}
	pre := chosen.Preprocess
	own.Preprocess = &pre
	if err := own.Save(path); err != nil {
		return &setting.Error{Setting: "write_sidecar", Err: err}
	}
	return nil
}

// Request is the search c describes of the model at path, whose own
// settings are own, its masks read with masks (their label map over the
// model's) and each candidate opened with open; and its candidates: the
// current preprocessing (its fixed size applied) and the others.
func (c Config) Request(path string, own imageio.Sidecar, masks imageio.MaskOptions,
	open func(path string, settings imageio.Sidecar) (*inference.Segmenter, error)) (Request, []Candidate, error) {
	settings := own
	if settings.Preprocess == nil { // segtune's defaults
		settings.Preprocess = &imageio.Preprocess{}
	}
	if masks.Map != nil {
		settings.LabelMap = masks.Map
	}
	seg, err := open(path, settings)
	if err != nil {
		return Request{}, nil, err
	}
	current, ct := seg.Pre, seg.Contract
	seg.Close()
	req := Request{Model: path, Settings: settings, Sample: c.Sample, Open: open,
		Options: evaluate.SetupOptions{Ignore: &c.Ignore, MaskPalette: masks.Palette}}
	return req, Candidates(current, ct.Height, ct.Width), nil
}
