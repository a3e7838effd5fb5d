package annot

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
)

// DefaultCOCOMaxBytes is the default size limit of a COCO JSON file
// (2 GiB: COCO-Stuff's train annotations are about 1.1 GB).
const DefaultCOCOMaxBytes = 2 << 30

// DefaultMaxVertices is the default limit on the vertices of one
// annotation's polygons; COCO's own have at most a few hundred.
const DefaultMaxVertices = 100_000

// maxPerimeterRatio bounds a polygon's outline at this many times the
// image's width plus height: far longer outlines are not drawings of
// anything in the image, and tracing them costs time in proportion.
const maxPerimeterRatio = 256

// COCOOptions controls how COCO annotations become masks.
type COCOOptions struct {
	// ImageDir is the folder that images' file_name is relative to.
	ImageDir string
	// NoBackground leaves out the background class: categories are
	// classes 0..K−1 and pixels no annotation covers are Ignore.
	NoBackground bool
	// CrowdAsClass paints iscrowd annotations with their category's class
	// instead of Ignore.
	CrowdAsClass bool
	// MaxFileBytes limits the JSON file's size; 0 means DefaultCOCOMaxBytes.
	MaxFileBytes int64
	// MaxVertices limits the vertices of one annotation's polygons; 0
	// means DefaultMaxVertices.
	MaxVertices int
	// MaxPixels limits an image's declared width×height; 0 means
	// imageio.DefaultMaxPixels.
	MaxPixels int64
}

type cocoImage struct {
	ID       json.Number `json:"id"`
	FileName string      `json:"file_name"`
	Width    int         `json:"width"`
	Height   int         `json:"height"`
}

type cocoAnnotation struct {
	ID           json.Number     `json:"id"`
	ImageID      json.Number     `json:"image_id"`
	CategoryID   json.Number     `json:"category_id"`
	IsCrowd      int             `json:"iscrowd"`
	Segmentation json.RawMessage `json:"segmentation"`
}

type cocoCategory struct {
	ID   json.Number `json:"id"`
	Name string      `json:"name"`
}

// cocoRLE is an RLE segmentation: counts are a compressed string or a
// list of numbers; size is [height, width].
type cocoRLE struct {
	Size   []int           `json:"size"`
	Counts json.RawMessage `json:"counts"`
}

// cocoShape is one annotation, checked and ready to paint: either
// polygons or RLE counts.
type cocoShape struct {
	class    uint8
	polygons [][]float64
	counts   []uint32
}

// cocoPending is an annotation's shape before the categories are known
// (COCO lists them last): its image, annotation and category ids.
type cocoPending struct {
	shape    cocoShape
	sample   int
	ann, cat string
	crowd    bool
}

// ReadCOCO reads a COCO annotation file (instances or stuff). Every
// annotation is checked before it returns; masks are rasterised when a
// Sample's Mask is called. Refused, with the annotation's id: RLE whose
// size is not the image's or whose counts do not cover it exactly,
// polygons with an odd number of coordinates, a vertex more than an image
// size outside the image, an outline longer than 256 times the image's
// width plus height, more than MaxVertices vertices in one annotation.
//
// As in pycocotools' annToMask, the polygons of one annotation are
// united. Unlike it, a first polygon of 4 coordinates is a (degenerate)
// polygon, not a box.
func ReadCOCO(path string, opt COCOOptions) (*Set, error) {
	limit := opt.MaxFileBytes
	if limit <= 0 {
		limit = DefaultCOCOMaxBytes
	}
	var f io.ReadCloser
	open := func() (io.Reader, error) {
		if f != nil {
			f.Close()
		}
		var err error
		if f, err = regfile.OpenLimit(path, limit); err != nil {
			return nil, fmt.Errorf("read COCO annotations: %w", err)
		}
		return bufio.NewReaderSize(f, 1<<16), nil
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	return decodeCOCO(open, path, opt)
}

// DecodeCOCO decodes COCO annotation JSON; name is the file named in
// errors and Set.Source.
func DecodeCOCO(data []byte, name string, opt COCOOptions) (*Set, error) {
	return decodeCOCO(func() (io.Reader, error) { return bytes.NewReader(data), nil }, name, opt)
}

// decodeCOCO reads the COCO JSON that open gives as a stream, one image,
// annotation or category at a time, checking each as it comes: what it
// keeps is the samples and shapes it returns. Annotations need their
// image's size; in the rare file that lists them before the images, they
// are read in a second pass over the file rather than kept unread.
func decodeCOCO(open func() (io.Reader, error), name string, opt COCOOptions) (*Set, error) {
	maxPixels := opt.MaxPixels
	if maxPixels <= 0 {
		maxPixels = imageio.DefaultMaxPixels
	}
	maxVertices := opt.MaxVertices
	if maxVertices <= 0 {
		maxVertices = DefaultMaxVertices
	}
	set := &Set{Source: name}
	imageIndex := map[string]int{}
	fileOf := map[string]string{} // cleaned file_name → image id
	var cats []cocoCategory
	var pending []cocoPending
	sawImages, later := false, false
	pass := func(second bool) error {
		r, err := open()
		if err != nil {
			return err
		}
		dec := json.NewDecoder(r)
		dec.UseNumber()
		s := jsonStream{dec}
		err = s.object("COCO JSON", func(key string) error {
			switch {
			case key == "images" && !second:
				sawImages = true
				return s.list("images", func(int) error {
					var im cocoImage
					if err := dec.Decode(&im); err != nil {
						return fmt.Errorf("an image: %w", err)
					}
					return cocoAddImage(set, im, imageIndex, fileOf, name, opt.ImageDir, maxPixels)
				})
			case key == "categories" && !second:
				return s.list("categories", func(int) error {
					var c cocoCategory
					if err := dec.Decode(&c); err != nil {
						return fmt.Errorf("a category: %w", err)
					}
					if len(cats) > MaxClasses {
						return errorf(name, "categories", "more than %d categories do not fit in a byte mask", MaxClasses)
					}
					cats = append(cats, c)
					return nil
				})
			case key == "annotations" && (second || sawImages):
				return s.list("annotations", func(int) error {
					var a cocoAnnotation
					if err := dec.Decode(&a); err != nil {
						return fmt.Errorf("an annotation: %w", err)
					}
					item := "annotation " + a.ID.String()
					i, ok := imageIndex[a.ImageID.String()]
					if !ok {
						return errorf(name, item, "image_id %q is not in images", a.ImageID.String())
					}
					sm := set.Samples[i]
					shape, err := parseSegmentation(a.Segmentation, sm.Width, sm.Height, maxVertices)
					if err != nil {
						return errorf(name, item, "segmentation: %v", err)
					}
					pending = append(pending, cocoPending{shape: shape, sample: i, ann: a.ID.String(), cat: a.CategoryID.String(), crowd: a.IsCrowd != 0})
					return nil
				})
			case key == "annotations":
				later = true // before the images: read in a second pass
			}
			_, _, err := s.scalar()
			return err
		})
		if err != nil {
			var e *Error
			if errors.As(err, &e) {
				return e
			}
			return errorf(name, "", "not COCO JSON: %v", lsReadError(err))
		}
		return nil
	}
	if err := pass(false); err != nil {
		return nil, err
	}
	if later {
		if err := pass(true); err != nil {
			return nil, err
		}
	}
	classes, classOf, err := cocoClasses(cats, name, opt.NoBackground)
	if err != nil {
		return nil, err
	}
	set.Classes = classes
	shapes := make([][]cocoShape, len(set.Samples))
	for _, p := range pending {
		class, ok := classOf[p.cat]
		if !ok {
			return nil, errorf(name, "annotation "+p.ann, "category_id %q is not in categories", p.cat)
		}
		if p.crowd && !opt.CrowdAsClass {
			class = Ignore
		}
		p.shape.class = class
		shapes[p.sample] = append(shapes[p.sample], p.shape)
	}
	fill := uint8(0)
	if opt.NoBackground {
		fill = Ignore
	}
	for i := range set.Samples {
		s, sh := &set.Samples[i], shapes[i]
		w, h := s.Width, s.Height
		s.mask = func() ([]uint8, error) { return paintCOCO(sh, w, h, fill), nil }
	}
	return set, nil
}

// cocoAddImage checks an image entry and adds its sample.
func cocoAddImage(set *Set, im cocoImage, imageIndex map[string]int, fileOf map[string]string, name, dir string, maxPixels int64) error {
	item := "image " + im.ID.String()
	if im.ID == "" {
		return errorf(name, "image "+im.FileName, "has no id")
	}
	if _, dup := imageIndex[im.ID.String()]; dup {
		return errorf(name, item, "id appears twice")
	}
	if im.Width <= 0 || im.Height <= 0 || int64(im.Width)*int64(im.Height) > maxPixels {
		return errorf(name, item, "size %dx%d is not between 1x1 and %d pixels", im.Width, im.Height, maxPixels)
	}
	p, err := joinImage(dir, im.FileName)
	if err != nil || im.FileName == "" {
		return errorf(name, item, "file_name %q is not a relative path", im.FileName)
	}
	// Two images of one file would pair it with two masks, and layouts
	// that pair by file name would lose one of them.
	if other, dup := fileOf[p]; dup {
		return errorf(name, item, "file_name %q is also image %s's", im.FileName, other)
	}
	fileOf[p] = im.ID.String()
	imageIndex[im.ID.String()] = len(set.Samples)
	set.Samples = append(set.Samples, Sample{Image: p, Ref: im.FileName, Width: im.Width, Height: im.Height})
	return nil
}

// cocoClasses orders the categories by id and gives each its class index
// (see the package doc).
func cocoClasses(cats []cocoCategory, name string, noBackground bool) ([]string, map[string]uint8, error) {
	type cat struct {
		id   json.Number
		name string
	}
	sorted := make([]cat, 0, len(cats))
	seen := make(map[string]bool, len(cats))
	for _, c := range cats {
		if _, err := c.ID.Int64(); err != nil {
			return nil, nil, errorf(name, "category "+c.Name, "id %q is not an integer", c.ID.String())
		}
		if seen[c.ID.String()] {
			return nil, nil, errorf(name, "category "+c.ID.String(), "id appears twice")
		}
		seen[c.ID.String()] = true
		sorted = append(sorted, cat{c.ID, c.Name})
	}
	slices.SortFunc(sorted, func(a, b cat) int {
		x, _ := a.id.Int64()
		y, _ := b.id.Int64()
		return cmp.Compare(x, y)
	})
	var classes []string
	classOf := make(map[string]uint8, len(sorted))
	if !noBackground {
		bg := slices.IndexFunc(sorted, func(c cat) bool { return strings.EqualFold(c.name, "background") })
		if bg >= 0 {
			classOf[sorted[bg].id.String()] = 0
			classes = append(classes, sorted[bg].name)
			sorted = slices.Delete(sorted, bg, bg+1)
		} else {
			classes = append(classes, "background")
		}
	}
	if len(classes)+len(sorted) > MaxClasses {
		return nil, nil, errorf(name, "categories", "%d classes do not fit in a byte mask (at most %d besides ignore)", len(classes)+len(sorted), MaxClasses)
	}
	for _, c := range sorted {
		classOf[c.id.String()] = uint8(len(classes))
		classes = append(classes, c.name)
	}
	return classes, classOf, nil
}

// parseSegmentation checks a segmentation for a w×h image and returns it
// ready to paint.
func parseSegmentation(raw json.RawMessage, w, h, maxVertices int) (cocoShape, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] == 'n' {
		return cocoShape{}, fmt.Errorf("missing")
	}
	if raw[0] == '[' {
		// Every polygon, empty or not, costs a slice: count them with
		// the vertices before any is made.
		if n := bytes.Count(raw, []byte{'['}) - 1; n > maxVertices {
			return cocoShape{}, fmt.Errorf("%d polygons are more than the %d vertices allowed", n, maxVertices)
		}
		var polys [][]float64
		if err := json.Unmarshal(raw, &polys); err != nil {
			return cocoShape{}, fmt.Errorf("polygons are not lists of numbers: %v", err)
		}
		vertices := 0
		for i, p := range polys {
			if len(p)%2 != 0 {
				return cocoShape{}, fmt.Errorf("polygon %d has an odd number (%d) of coordinates", i, len(p))
			}
			vertices += len(p) / 2
			if vertices > maxVertices {
				return cocoShape{}, fmt.Errorf("polygons have more than %d vertices", maxVertices)
			}
			for j := 0; j < len(p); j += 2 {
				// A vertex more than an image size outside the image
				// is no drawing of it.
				if !(p[j] >= -float64(w) && p[j] <= 2*float64(w) && p[j+1] >= -float64(h) && p[j+1] <= 2*float64(h)) {
					return cocoShape{}, fmt.Errorf("polygon %d vertex %d (%v, %v) is far outside the %dx%d image", i, j/2, p[j], p[j+1], w, h)
				}
			}
			if per := polygonPerimeter(p); per > maxPerimeterRatio*float64(w+h) {
				return cocoShape{}, fmt.Errorf("polygon %d's outline is %.0f pixels long, over %d times the image's width plus height", i, per, maxPerimeterRatio)
			}
		}
		// Empty polygons paint nothing; keep only the others.
		if slices.ContainsFunc(polys, func(p []float64) bool { return len(p) == 0 }) {
			polys = slices.Clone(slices.DeleteFunc(polys, func(p []float64) bool { return len(p) == 0 }))
		}
		return cocoShape{polygons: polys}, nil
	}
	var r cocoRLE
	if err := json.Unmarshal(raw, &r); err != nil {
		return cocoShape{}, fmt.Errorf("neither polygons nor RLE: %v", err)
	}
	if len(r.Size) != 2 || r.Size[0] != h || r.Size[1] != w {
		return cocoShape{}, fmt.Errorf("RLE size %v is not the image's [height width] [%d %d]", r.Size, h, w)
	}
	counts := bytes.TrimSpace(r.Counts)
	switch {
	case len(counts) > 0 && counts[0] == '"':
		var s string
		if err := json.Unmarshal(counts, &s); err != nil {
			return cocoShape{}, fmt.Errorf("RLE counts: %v", err)
		}
		c, err := decodeRLEString(s, w*h)
		if err != nil {
			return cocoShape{}, err
		}
		return cocoShape{counts: c}, nil
	case len(counts) > 0 && counts[0] == '[':
		// Checked while decoding: no more counts than pixels (+1 for
		// a leading empty run), so the list cannot be larger than the file
		// suggests and no larger than the mask.
		if n := bytes.Count(counts, []byte(",")) + 1; n > w*h+1 {
			return cocoShape{}, fmt.Errorf("RLE has %d counts for %d pixels", n, w*h)
		}
		var raw []float64
		if err := json.Unmarshal(counts, &raw); err != nil {
			return cocoShape{}, fmt.Errorf("RLE counts are not a list of numbers: %v", err)
		}
		c, err := checkCounts(raw, w*h)
		if err != nil {
			return cocoShape{}, err
		}
		return cocoShape{counts: c}, nil
	}
	return cocoShape{}, fmt.Errorf("RLE counts are neither a string nor a list")
}

// paintCOCO paints an image's annotations in order, later over earlier;
// the polygons of one annotation are united, as pycocotools' annToRLE
// merges them.
func paintCOCO(shapes []cocoShape, w, h int, fill uint8) []uint8 {
	m := make([]uint8, w*h)
	if fill != 0 {
		for i := range m {
			m[i] = fill
		}
	}
	for _, s := range shapes {
		if s.counts != nil {
			paintRLE(m, s.counts, w, h, s.class)
			continue
		}
		for _, p := range s.polygons {
			paintRLE(m, polygonRLE(p, h, w), w, h, s.class)
		}
	}
	return m
}
