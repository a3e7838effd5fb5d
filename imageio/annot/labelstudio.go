package annot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
)

// DefaultLabelStudioMaxBytes is the default size limit of a Label Studio
// JSON export (brush RLE makes them large).
const DefaultLabelStudioMaxBytes = 1 << 30

// LabelStudioOptions controls how a Label Studio JSON export becomes
// masks.
type LabelStudioOptions struct {
	// ImageDir is the folder holding the tasks' images, found there by
	// the base name of the task's image URL (for uploads that is the
	// stored name, prefixed with Label Studio's 8-character id).
	ImageDir string
	// DataKey is the key of the image URL in each task's data; "" means
	// "image", or the only string in data.
	DataKey string
	// Labels orders the brush labels: the class of Labels[i] is i+1, or
	// i with NoBackground; a brush label not in it is an error. Nil
	// means all brush labels in the export, sorted.
	Labels []string
	// NoBackground leaves out the background class: labels are classes
	// 0..K−1 and undrawn pixels are Ignore.
	NoBackground bool
	// MaxFileBytes limits the file's size; 0 means
	// DefaultLabelStudioMaxBytes.
	MaxFileBytes int64
	// MaxPixels limits an image's width×height; 0 means
	// imageio.DefaultMaxPixels.
	MaxPixels int64
}

type lsTask struct {
	ID          json.Number    `json:"id"`
	Data        map[string]any `json:"data"`
	Annotations []lsAnnotation `json:"annotations"`
	Completions []lsAnnotation `json:"completions"` // exports of Label Studio before 1.0
}

type lsAnnotation struct {
	ID           json.Number `json:"id"`
	WasCancelled bool        `json:"was_cancelled"`
	Result       []lsResult  `json:"result"`
}

type lsResult struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	OriginalWidth  int    `json:"original_width"`
	OriginalHeight int    `json:"original_height"`
	Value          struct {
		Format      string   `json:"format"`
		RLE         []int    `json:"rle"`
		BrushLabels []string `json:"brushlabels"`
	} `json:"value"`
}

// brush is one checked brush result: its label and RLE bytes.
type brush struct {
	label string
	rle   []byte
}

// ReadLabelStudio reads a Label Studio JSON export (the "JSON" export: a
// list of tasks). Each task with an annotation is a sample; its mask
// paints the brush results of its first annotation that was not
// cancelled, later results over earlier ones. Tasks without such an
// annotation, or whose annotation has no brush (the export then does not
// give the image's size), are listed in Set.Unlabelled. Region results other than brushes (polygons,
// rectangles…) are errors; results that mark no region (choices, text)
// are skipped.
func ReadLabelStudio(path string, opt LabelStudioOptions) (*Set, error) {
	limit := opt.MaxFileBytes
	if limit <= 0 {
		limit = DefaultLabelStudioMaxBytes
	}
	data, err := regfile.ReadSmall(path, limit)
	if err != nil {
		return nil, fmt.Errorf("read Label Studio export: %w", err)
	}
	return DecodeLabelStudio(data, path, opt)
}

// DecodeLabelStudio decodes a Label Studio JSON export; name is the file
// named in errors and Set.Source.
func DecodeLabelStudio(data []byte, name string, opt LabelStudioOptions) (*Set, error) {
	var tasks []lsTask
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&tasks); err != nil {
		return nil, errorf(name, "", "not a Label Studio JSON export (a list of tasks): %v", err)
	}
	maxPixels := opt.MaxPixels
	if maxPixels <= 0 {
		maxPixels = imageio.DefaultMaxPixels
	}
	set := &Set{Source: name}
	var brushes [][]brush
	seen := map[string]bool{}
	for _, t := range tasks {
		item := "task " + t.ID.String()
		ref, err := lsImageRef(t.Data, opt.DataKey)
		if err != nil {
			return nil, errorf(name, item, "%v", err)
		}
		anns := t.Annotations
		if anns == nil {
			anns = t.Completions
		}
		i := slices.IndexFunc(anns, func(a lsAnnotation) bool { return !a.WasCancelled })
		if i < 0 {
			set.Unlabelled = append(set.Unlabelled, ref)
			continue
		}
		a := anns[i]
		item += " annotation " + a.ID.String()
		w, h, bs, err := lsBrushes(a.Result, maxPixels)
		if err != nil {
			return nil, errorf(name, item, "%v", err)
		}
		if w == 0 {
			// Without a brush the export does not give the image's size.
			set.Unlabelled = append(set.Unlabelled, ref)
			continue
		}
		for _, b := range bs {
			seen[b.label] = true
		}
		img, err := joinImage(opt.ImageDir, lsBaseName(ref))
		if err != nil {
			return nil, errorf(name, item, "%v", err)
		}
		set.Samples = append(set.Samples, Sample{Image: img, Ref: ref, Width: w, Height: h})
		brushes = append(brushes, bs)
	}
	labels := opt.Labels
	if labels == nil {
		for l := range seen {
			labels = append(labels, l)
		}
		slices.Sort(labels)
	}
	classOf := map[string]uint8{}
	fill := uint8(0)
	if opt.NoBackground {
		fill = Ignore
	} else {
		set.Classes = append(set.Classes, "background")
	}
	for _, l := range labels {
		if _, dup := classOf[l]; dup {
			return nil, errorf(name, "labels", "%q is listed twice", l)
		}
		if len(set.Classes) == MaxClasses {
			return nil, errorf(name, "labels", "more than %d classes do not fit in a byte mask", MaxClasses)
		}
		classOf[l] = uint8(len(set.Classes))
		set.Classes = append(set.Classes, l)
	}
	for i := range set.Samples {
		s, bs := &set.Samples[i], brushes[i]
		for _, b := range bs {
			if _, ok := classOf[b.label]; !ok {
				return nil, errorf(name, "image "+s.Ref, "brush label %q is not one of the labels %q", b.label, labels)
			}
		}
		w, h, file := s.Width, s.Height, name
		s.mask = func() ([]uint8, error) { return paintBrushes(bs, classOf, w, h, fill, file) }
	}
	return set, nil
}

// lsImageRef finds the image URL in a task's data.
func lsImageRef(data map[string]any, key string) (string, error) {
	if key == "" {
		if _, ok := data["image"]; ok {
			key = "image"
		} else {
			var only []string
			for k, v := range data {
				if _, ok := v.(string); ok {
					only = append(only, k)
				}
			}
			if len(only) != 1 {
				return "", fmt.Errorf("data has no \"image\" key and %d string values; name the image's key", len(only))
			}
			key = only[0]
		}
	}
	s, ok := data[key].(string)
	if !ok || s == "" {
		return "", fmt.Errorf("data[%q] is not an image URL", key)
	}
	return s, nil
}

// lsBaseName is the file name at the end of an image URL or path
// ("/data/upload/3/1a2b3c4d-cat.jpg" → "1a2b3c4d-cat.jpg",
// "/data/local-files/?d=photos/cat.jpg" → "cat.jpg").
func lsBaseName(ref string) string {
	if u, err := url.Parse(ref); err == nil {
		if d := u.Query().Get("d"); d != "" {
			return path.Base(d)
		}
		if u.Path != "" {
			return path.Base(u.Path)
		}
	}
	return path.Base(strings.ReplaceAll(ref, `\`, "/"))
}

// lsBrushes checks an annotation's results and returns the image size and
// its brushes in order.
func lsBrushes(results []lsResult, maxPixels int64) (w, h int, bs []brush, err error) {
	for _, r := range results {
		switch {
		case r.Type == "brushlabels":
		case r.Type == "brush" || strings.HasSuffix(r.Type, "labels"):
			return 0, 0, nil, fmt.Errorf("result %s is of type %q; only brushlabels results can be read", r.ID, r.Type)
		default:
			continue
		}
		rw, rh := r.OriginalWidth, r.OriginalHeight
		if rw <= 0 || rh <= 0 || int64(rw)*int64(rh) > maxPixels {
			return 0, 0, nil, fmt.Errorf("result %s: size %dx%d is not between 1x1 and %d pixels", r.ID, rw, rh, maxPixels)
		}
		if w != 0 && (rw != w || rh != h) {
			return 0, 0, nil, fmt.Errorf("result %s is %dx%d but an earlier one is %dx%d", r.ID, rw, rh, w, h)
		}
		w, h = rw, rh
		if r.Value.Format != "rle" {
			return 0, 0, nil, fmt.Errorf("result %s: brush format %q is not rle", r.ID, r.Value.Format)
		}
		if len(r.Value.BrushLabels) != 1 {
			return 0, 0, nil, fmt.Errorf("result %s has %d brush labels, not one", r.ID, len(r.Value.BrushLabels))
		}
		rle := make([]byte, len(r.Value.RLE))
		for i, v := range r.Value.RLE {
			if v < 0 || v > 255 {
				return 0, 0, nil, fmt.Errorf("result %s: rle[%d] = %d is not a byte", r.ID, i, v)
			}
			rle[i] = byte(v)
		}
		// Decode once now so that a bad brush is named before any work.
		if _, err := decodeBrushRLE(rle, w, h); err != nil {
			return 0, 0, nil, fmt.Errorf("result %s: %v", r.ID, err)
		}
		bs = append(bs, brush{label: r.Value.BrushLabels[0], rle: rle})
	}
	return w, h, bs, nil
}

func paintBrushes(bs []brush, classOf map[string]uint8, w, h int, fill uint8, file string) ([]uint8, error) {
	m := make([]uint8, w*h)
	if fill != 0 {
		for i := range m {
			m[i] = fill
		}
	}
	for _, b := range bs {
		drawn, err := decodeBrushRLE(b.rle, w, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", file, err)
		}
		c := classOf[b.label]
		for i, d := range drawn {
			if d != 0 {
				m[i] = c
			}
		}
	}
	return m, nil
}
