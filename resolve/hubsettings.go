package resolve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/models/hub"
)

// A Hub model's repository says how to feed it and what its classes are
// in transformers' files: preprocessor_config.json (image_mean,
// image_std, size, do_rescale/rescale_factor, do_normalize,
// do_flip_channel_order) and config.json (id2label). They become a
// settings layer below the model's own metadata, its sidecar and flags.

// hubLayer is the settings layer of a model downloaded from the Hub, or
// nil for any other file. What its files lack or get wrong is in the
// layer's Notes, never an error: the sidecar or flags can still say it.
func hubLayer(modelPath string) *Layer {
	pin, root, err := hub.LookupPin(HubCacheDir(), modelPath)
	if err != nil || pin == nil {
		return nil
	}
	s, notes := HubSettings(root)
	return &Layer{From: fmt.Sprintf("hf:%s@%s (preprocessor_config.json, config.json)", pin.Repo, pin.Commit), Settings: s, Notes: notes}
}

// preprocessorConfig is what segtune reads of preprocessor_config.json.
type preprocessorConfig struct {
	ImageMean          json.RawMessage `json:"image_mean"`
	ImageStd           json.RawMessage `json:"image_std"`
	Size               json.RawMessage `json:"size"`
	DoResize           *bool           `json:"do_resize"`
	DoRescale          *bool           `json:"do_rescale"`
	RescaleFactor      *float64        `json:"rescale_factor"`
	DoNormalize        *bool           `json:"do_normalize"`
	DoFlipChannelOrder *bool           `json:"do_flip_channel_order"`
	DoCenterCrop       *bool           `json:"do_center_crop"`
}

// HubSettings reads the settings in the transformers files of a
// repository's folder root, with notes on what was missing, malformed or
// left out. Absent flags take transformers' defaults (resize, rescale by
// 1/255, normalize).
func HubSettings(root string) (imageio.Sidecar, []string) {
	var s imageio.Sidecar
	var notes []string
	note := func(format string, args ...any) { notes = append(notes, fmt.Sprintf(format, args...)) }
	read := func(name string, v any) bool {
		p := filepath.Join(root, name)
		data, err := regfile.ReadSmall(p, 1<<20)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			note("the repository has no %s", name)
			return false
		case err != nil:
			note("%v; ignored", err)
			return false
		}
		if err := json.Unmarshal(data, v); err != nil {
			note("%s is not valid JSON (%v); ignored", p, err)
			return false
		}
		return true
	}
	var pc preprocessorConfig
	if read("preprocessor_config.json", &pc) {
		pre, ok := pc.preprocess(func(format string, args ...any) { note("preprocessor_config.json: "+format, args...) })
		if ok {
			s.Preprocess = &pre
		}
	}
	var cfg struct {
		ID2Label map[string]string `json:"id2label"`
	}
	if read("config.json", &cfg) {
		classes, err := classesOf(cfg.ID2Label)
		if err != nil {
			note("config.json: id2label %v; class names not used", err)
		} else {
			s.Classes = classes
		}
	}
	return s, notes
}

// preprocess turns the configuration into segtune's preprocessing.
func (pc preprocessorConfig) preprocess(note func(string, ...any)) (imageio.Preprocess, bool) {
	on := func(b *bool) bool { return b == nil || *b }
	var p imageio.Preprocess
	if on(pc.DoResize) && len(pc.Size) > 0 {
		h, w, err := sizeOf(pc.Size)
		if err != nil {
			note("size %s: %v; set the size yourself", pc.Size, err)
		} else {
			p.Height, p.Width, p.Resize = h, w, imageio.ResizeStretch
		}
	}
	if pc.DoCenterCrop != nil && *pc.DoCenterCrop {
		note("do_center_crop is not applied (segtune segments the whole image)")
	}
	if pc.DoFlipChannelOrder != nil && *pc.DoFlipChannelOrder {
		p.ChannelOrder = imageio.BGR
	}
	factor := 1.0
	if on(pc.DoRescale) {
		factor = 1.0 / 255
		if pc.RescaleFactor != nil {
			factor = *pc.RescaleFactor
		}
		if !(factor > 0) || math.IsInf(factor, 0) {
			note("rescale_factor %v is not a positive number; preprocessing not used", factor)
			return p, false
		}
	}
	if on(pc.DoNormalize) && (len(pc.ImageMean) > 0 || len(pc.ImageStd) > 0) {
		mean, err1 := triple(pc.ImageMean)
		std, err2 := triple(pc.ImageStd)
		if err := errors.Join(err1, err2); err != nil {
			note("image_mean/image_std: %v; preprocessing not used", err)
			return p, false
		}
		// transformers computes (x*factor - mean)/std; with the usual
		// factor that is mean/std on 0..1, else mean/std scaled to 0..255.
		if math.Abs(factor-1.0/255) < 1e-12 {
			p.Mean, p.Std, p.MeanStdRange = mean, std, "0..1"
		} else {
			for c := range mean {
				mean[c], std[c] = mean[c]/factor, std[c]/factor
			}
			p.Mean, p.Std, p.MeanStdRange = mean, std, "0..255"
		}
	} else {
		p.ValueScale = factor
	}
	if err := p.Validate(); err != nil {
		note("%v; preprocessing not used", err)
		return p, false
	}
	return p, true
}

// sizeOf reads transformers' size: a number, or {"height", "width"}.
func sizeOf(raw json.RawMessage) (h, w int, err error) {
	var n int
	if json.Unmarshal(raw, &n) == nil && n > 0 {
		return n, n, nil
	}
	var m map[string]int
	if err := json.Unmarshal(raw, &m); err != nil {
		return 0, 0, errors.New("not a number nor an object of numbers")
	}
	if m["height"] > 0 && m["width"] > 0 {
		return m["height"], m["width"], nil
	}
	return 0, 0, errors.New("only a fixed height and width are applied (shortest_edge and longest_edge resizing is not)")
}

// triple reads a per-channel value: a number or a list of 1 or 3.
func triple(raw json.RawMessage) ([]float64, error) {
	var one float64
	if json.Unmarshal(raw, &one) == nil {
		return []float64{one, one, one}, nil
	}
	var l []float64
	if err := json.Unmarshal(raw, &l); err != nil || (len(l) != 1 && len(l) != 3) {
		return nil, fmt.Errorf("%s is not a number or a list of 3", raw)
	}
	if len(l) == 1 {
		l = []float64{l[0], l[0], l[0]}
	}
	return l, nil
}

// classesOf orders id2label's names by id; the ids must be 0..n-1.
func classesOf(m map[string]string) ([]string, error) {
	if len(m) == 0 {
		return nil, errors.New("is missing or empty")
	}
	ids := make([]int, 0, len(m))
	byID := map[int]string{}
	for k, v := range m {
		id, err := strconv.Atoi(strings.TrimSpace(k))
		if err != nil || id < 0 {
			return nil, fmt.Errorf("key %q is not a class index", k)
		}
		ids = append(ids, id)
		byID[id] = v
	}
	sort.Ints(ids)
	out := make([]string, len(ids))
	for i, id := range ids {
		if id != i {
			return nil, fmt.Errorf("misses class %d (its indices are not 0..%d)", i, len(ids)-1)
		}
		out[i] = byID[id]
	}
	return out, nil
}
