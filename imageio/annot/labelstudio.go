package annot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strconv"
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
// are skipped. The file is read as a stream, one task at a time, and
// checked as it is read: what it costs in memory is about the brushes it
// keeps (a fraction of the file), whatever else the file lists.
func ReadLabelStudio(path string, opt LabelStudioOptions) (*Set, error) {
	limit := opt.MaxFileBytes
	if limit <= 0 {
		limit = DefaultLabelStudioMaxBytes
	}
	f, err := regfile.OpenLimit(path, limit)
	if err != nil {
		return nil, fmt.Errorf("read Label Studio export: %w", err)
	}
	defer f.Close()
	return decodeLabelStudio(bufio.NewReaderSize(f, 1<<16), path, opt)
}

// DecodeLabelStudio decodes a Label Studio JSON export; name is the file
// named in errors and Set.Source.
func DecodeLabelStudio(data []byte, name string, opt LabelStudioOptions) (*Set, error) {
	return decodeLabelStudio(bytes.NewReader(data), name, opt)
}

func decodeLabelStudio(r io.Reader, name string, opt LabelStudioOptions) (*Set, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		if err == nil {
			err = fmt.Errorf("it starts with %v", tok)
		}
		return nil, errorf(name, "", "not a Label Studio JSON export (a list of tasks): %v", lsReadError(err))
	}
	maxPixels := opt.MaxPixels
	if maxPixels <= 0 {
		maxPixels = imageio.DefaultMaxPixels
	}
	set := &Set{Source: name}
	var brushes [][]brush
	seen := map[string]bool{}
	s := jsonStream{dec}
	for n := 1; dec.More(); n++ {
		t, err := readLSTask(s, opt.DataKey, maxPixels)
		if err != nil {
			return nil, errorf(name, fmt.Sprintf("task %d in the list", n), "%v", lsReadError(err))
		}
		item := "task " + t.id
		if t.refErr != nil {
			return nil, errorf(name, item, "%v", t.refErr)
		}
		a := t.annotations
		if !t.hasAnnotations {
			a = t.completions
		}
		if a == nil {
			set.Unlabelled = append(set.Unlabelled, t.ref)
			continue
		}
		item += " annotation " + a.id
		if a.err != nil {
			return nil, errorf(name, item, "%v", a.err)
		}
		if a.w == 0 {
			// Without a brush the export does not give the image's size.
			set.Unlabelled = append(set.Unlabelled, t.ref)
			continue
		}
		for _, b := range a.brushes {
			seen[b.label] = true
		}
		if opt.Labels == nil && len(seen) > MaxClasses-1 {
			return nil, errorf(name, item, "more than %d brush labels: the classes do not fit in a byte mask", MaxClasses-1)
		}
		img, err := joinImage(opt.ImageDir, lsBaseName(t.ref))
		if err != nil {
			return nil, errorf(name, item, "%v", err)
		}
		set.Samples = append(set.Samples, Sample{Image: img, Ref: t.ref, Width: a.w, Height: a.h})
		brushes = append(brushes, a.brushes)
	}
	if _, err := dec.Token(); err != nil {
		return nil, errorf(name, "", "the list of tasks does not end: %v", lsReadError(err))
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

// lsReadError unwraps the file-size error of a stream that went past its
// limit from the decoder's, so that it reads as the size it is.
func lsReadError(err error) error {
	var tl *regfile.TooLargeError
	if errors.As(err, &tl) {
		return tl
	}
	return err
}

// lsTask is what a task of the export leaves: its id, image reference
// (or why there is none) and the annotation each list chose.
type lsTask struct {
	id             string
	ref            string
	refErr         error
	hasAnnotations bool          // "annotations" is a list (else "completions", from before Label Studio 1.0)
	annotations    *lsAnnotation // the first not cancelled
	completions    *lsAnnotation
}

// lsAnnotation is an annotation's brushes and image size, or what is
// wrong with its results (reported only when it is the one used).
type lsAnnotation struct {
	id      string
	w, h    int
	brushes []brush
	err     error
}

// readLSTask reads one task from the stream. Keys come in any order, so
// the annotation lists are read whatever the data say, keeping only the
// first annotation of each that was not cancelled.
func readLSTask(s jsonStream, dataKey string, maxPixels int64) (*lsTask, error) {
	t := &lsTask{id: "?"}
	sawData := false
	err := s.object("task", func(key string) error {
		var err error
		switch key {
		case "id":
			t.id, err = s.number()
		case "data":
			sawData = true
			t.ref, t.refErr, err = readLSImageRef(s, dataKey)
		case "annotations":
			t.annotations, t.hasAnnotations, err = readLSAnnotations(s, key, maxPixels)
		case "completions":
			t.completions, _, err = readLSAnnotations(s, key, maxPixels)
		default:
			_, _, err = s.scalar()
		}
		return err
	})
	if err == nil && !sawData {
		t.refErr = fmt.Errorf("task has no data")
	}
	return t, err
}

// readLSImageRef reads a task's data object and finds the image URL in
// it: the value of key, of "image" when key is "", or else of the only
// string value. A data object without one is a reference error, not a
// stream error.
func readLSImageRef(s jsonStream, key string) (string, error, error) {
	want := key
	if want == "" {
		want = "image"
	}
	var found, sole, soleKey string
	hasKey, strs := false, 0
	err := s.object("data", func(k string) error {
		v, ok, err := s.str()
		switch {
		case k == want:
			hasKey, found = true, v
		case ok:
			strs++
			sole, soleKey = v, k
		}
		return err
	})
	if err != nil {
		return "", nil, err
	}
	if key == "" && !hasKey {
		if strs != 1 {
			return "", fmt.Errorf("data has no \"image\" key and %d string values; name the image's key", strs), nil
		}
		hasKey, found, want = true, sole, soleKey
	}
	if !hasKey || found == "" {
		return "", fmt.Errorf("data[%q] is not an image URL", want), nil
	}
	return found, nil, nil
}

// readLSAnnotations reads a list of annotations and returns the first
// that was not cancelled (nil: none), and whether there was a list (not
// null); the others are read past.
func readLSAnnotations(s jsonStream, what string, maxPixels int64) (*lsAnnotation, bool, error) {
	var chosen *lsAnnotation
	isList, err := s.nullableList(what, func(int) error {
		if chosen != nil {
			_, _, err := s.scalar()
			return err
		}
		a, cancelled := &lsAnnotation{id: "?"}, false
		err := s.object("annotation", func(key string) error {
			var err error
			switch key {
			case "id":
				a.id, err = s.number()
			case "was_cancelled":
				var t json.Token
				t, _, err = s.scalar()
				cancelled = t == true
			case "result":
				err = readLSResults(s, a, maxPixels)
			default:
				_, _, err = s.scalar()
			}
			return err
		})
		if !cancelled {
			chosen = a
		}
		return err
	})
	return chosen, isList, err
}

// lsResult is the part of a result that brushes use.
type lsResult struct {
	id, typ, format string
	w, h            int
	labels          int    // how many brush labels
	label           string // the first
	rle             []byte
	badAt           int // index of the first RLE value that is not a byte, or −1
	bad             string
}

// readLSResults reads an annotation's results into a, checking each
// brush; after the first bad result it only reads past the others.
func readLSResults(s jsonStream, a *lsAnnotation, maxPixels int64) error {
	return s.list("result", func(int) error {
		if a.err != nil {
			_, _, err := s.scalar()
			return err
		}
		r := lsResult{badAt: -1}
		err := s.object("result", func(key string) error {
			var err error
			switch key {
			case "id":
				r.id, err = s.number()
			case "type":
				r.typ, _, err = s.str()
			case "original_width":
				r.w, _, err = s.int()
			case "original_height":
				r.h, _, err = s.int()
			case "value":
				err = readLSValue(s, &r)
			default:
				_, _, err = s.scalar()
			}
			return err
		})
		if err != nil {
			return err
		}
		a.err = a.addBrush(r, maxPixels)
		return nil
	})
}

// readLSValue reads a result's value: the brush format, labels and RLE,
// the RLE straight into bytes.
func readLSValue(s jsonStream, r *lsResult) error {
	return s.object("value", func(key string) error {
		switch key {
		case "format":
			var err error
			r.format, _, err = s.str()
			return err
		case "brushlabels":
			return s.list("brushlabels", func(int) error {
				v, _, err := s.str()
				if r.labels == 0 {
					r.label = v
				}
				r.labels++
				return err
			})
		case "rle":
			return s.list("rle", func(i int) error {
				t, _, err := s.scalar()
				n, ok := t.(json.Number)
				v, perr := strconv.Atoi(n.String())
				if !ok || perr != nil || v < 0 || v > 255 {
					if r.badAt < 0 {
						r.badAt, r.bad = i, fmt.Sprint(t)
					}
					v = 0
				}
				r.rle = append(r.rle, byte(v))
				return err
			})
		}
		_, _, err := s.scalar()
		return err
	})
}

// addBrush checks a result and adds it to the annotation when it is a
// brush. Results that mark no region (choices, text) are skipped; other
// regions are errors.
func (a *lsAnnotation) addBrush(r lsResult, maxPixels int64) error {
	switch {
	case r.typ == "brushlabels":
	case r.typ == "brush" || strings.HasSuffix(r.typ, "labels"):
		return fmt.Errorf("result %s is of type %q; only brushlabels results can be read", r.id, r.typ)
	default:
		return nil
	}
	if r.w <= 0 || r.h <= 0 || int64(r.w)*int64(r.h) > maxPixels {
		return fmt.Errorf("result %s: size %dx%d is not between 1x1 and %d pixels", r.id, r.w, r.h, maxPixels)
	}
	if a.w != 0 && (r.w != a.w || r.h != a.h) {
		return fmt.Errorf("result %s is %dx%d but an earlier one is %dx%d", r.id, r.w, r.h, a.w, a.h)
	}
	a.w, a.h = r.w, r.h
	if r.format != "rle" {
		return fmt.Errorf("result %s: brush format %q is not rle", r.id, r.format)
	}
	if r.labels != 1 {
		return fmt.Errorf("result %s has %d brush labels, not one", r.id, r.labels)
	}
	if r.badAt >= 0 {
		return fmt.Errorf("result %s: rle[%d] = %s is not a byte", r.id, r.badAt, r.bad)
	}
	// Check the brush now so that a bad one is named before any work,
	// without painting it (that is for Mask).
	if err := checkBrushRLE(r.rle, r.w, r.h); err != nil {
		return fmt.Errorf("result %s: %v", r.id, err)
	}
	a.brushes = append(a.brushes, brush{label: r.label, rle: slices.Clip(r.rle)})
	return nil
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
