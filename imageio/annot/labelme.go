package annot

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/regfile"
)

// DefaultLabelMeMaxBytes is the default size limit of one LabelMe JSON
// file; LabelMe embeds the image in it as base64 (imageData).
const DefaultLabelMeMaxBytes = 256 << 20

// DefaultLabelMeMaxShapes is the default limit on the shapes of one file.
const DefaultLabelMeMaxShapes = 10_000

// DefaultLabelMeMaxVertices is the default limit on the points of one
// file's shapes; hand-drawn polygons have tens to hundreds. Filling a
// polygon takes time in proportion to its rows times its edges.
const DefaultLabelMeMaxVertices = 20_000

// LabelMe's special label names, as labelme2voc's labels.txt has them.
const (
	LabelMeIgnore     = "__ignore__"
	LabelMeBackground = "_background_"
)

// LabelMe draws line and linestrip shapes this wide, and point shapes as
// discs of this radius (shape_to_mask's defaults).
const (
	labelMeLineWidth   = 10
	labelMePointRadius = 5
)

// maxCircleRadius bounds a circle shape's radius: Pillow traces the
// circle in 64-bit integers that overflow past a diameter of about
// 55,000 pixels, far beyond any image this reads.
const maxCircleRadius = 1 << 14

// labelMePoints is how many points each shape type with a fixed number
// has.
var labelMePoints = map[string]int{"rectangle": 2, "circle": 2, "line": 2, "point": 1, "mask": 2}

// LabelMeOptions controls how LabelMe JSON files become masks.
type LabelMeOptions struct {
	// Labels are the lines of labelme2voc's labels.txt: optionally
	// __ignore__ (painted Ignore), then _background_ (class 0), then the
	// classes 1, 2, … in order; a shape label not in it is an error. Nil
	// means _background_ then every label of the files, sorted.
	Labels []string
	// LabelsFile names the file Labels came from, in errors.
	LabelsFile string
	// Root is the folder that images must be inside: a JSON's imagePath
	// is relative to the JSON's folder and may climb (../images/a.jpg),
	// but not out of Root. "" means each JSON's own folder.
	Root string
	// MaxFileBytes limits each JSON file's size; 0 means
	// DefaultLabelMeMaxBytes.
	MaxFileBytes int64
	// MaxShapes limits the shapes of one file; 0 means
	// DefaultLabelMeMaxShapes.
	MaxShapes int
	// MaxVertices limits the points of one file's shapes; 0 means
	// DefaultLabelMeMaxVertices.
	MaxVertices int
	// MaxPixels limits an image's declared width×height; 0 means
	// imageio.DefaultMaxPixels.
	MaxPixels int64
}

// lmFile is what is read of a LabelMe file (readLabelMeJSON).
type lmFile struct {
	Shapes                  []lmShape
	ImagePath               *string
	ImageHeight, ImageWidth int
}

type lmShape struct {
	Label     *string     `json:"label"`
	Points    [][]float64 `json:"-"`
	ShapeType string      `json:"shape_type"`
	Mask      *string     `json:"mask"`
}

// lmDrawn is one checked shape, ready to paint.
type lmDrawn struct {
	class uint8
	kind  string
	xy    []float64 // x0,y0,x1,y1,…
	mask  []byte    // a mask shape's PNG
}

// ReadLabelMeLabels reads labelme2voc's labels.txt: one label a line,
// blank lines skipped.
func ReadLabelMeLabels(path string) ([]string, error) {
	data, err := regfile.ReadSmall(path, regfile.SmallLimit)
	if err != nil {
		return nil, fmt.Errorf("read LabelMe labels: %w", err)
	}
	var labels []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			labels = append(labels, l)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read LabelMe labels %s: %w", path, err)
	}
	return labels, nil
}

// ReadLabelMe reads LabelMe JSON files, one per image, as LabelMe saves
// them. Every file and shape is checked before it returns; masks are
// drawn when a Sample's Mask is called, as labelme2voc draws them: each
// shape as labelme's shape_to_mask does with Pillow (polygon, rectangle,
// circle; line and linestrip 10 pixels wide, point a disc of radius 5;
// mask shapes' bitmaps placed at their first point), later shapes over
// earlier ones, undrawn pixels _background_ (class 0). Sample.Image is
// imagePath joined to the JSON's folder, Sample.Ref the JSON's path, and
// the size is imageWidth×imageHeight; when the image file exists, its
// header must agree. imageData is not read: the image comes from its
// file. Refused, naming the file and the shape: a polygon of fewer than
// 3 points, a rectangle, circle or line without 2, a point without 1, a
// coordinate that is not finite or is more than an image size outside
// the image, a circle of radius over 16384 pixels, an unknown
// shape_type, a label not in Labels, more than MaxShapes shapes or
// MaxVertices points.
func ReadLabelMe(files []string, opt LabelMeOptions) (*Set, error) {
	limit := opt.MaxFileBytes
	if limit <= 0 {
		limit = DefaultLabelMeMaxBytes
	}
	set := &Set{Source: opt.Root}
	var drawn [][]lmDrawn
	var labels [][]string
	for _, name := range files {
		data, err := regfile.ReadSmall(name, limit)
		if err != nil {
			return nil, fmt.Errorf("read LabelMe file: %w", err)
		}
		s, shapes, ls, err := decodeLabelMe(data, name, opt)
		if err != nil {
			return nil, err
		}
		set.Samples = append(set.Samples, s)
		drawn = append(drawn, shapes)
		labels = append(labels, ls)
	}
	classOf, err := labelMeClasses(set, labels, files, opt)
	if err != nil {
		return nil, err
	}
	for i := range set.Samples {
		s, shapes, ls := &set.Samples[i], drawn[i], labels[i]
		for j, l := range ls {
			shapes[j].class = classOf[l]
		}
		w, h, file := s.Width, s.Height, s.Ref
		s.mask = func() ([]uint8, error) { return paintLabelMe(shapes, w, h, file) }
	}
	return set, nil
}

// labelMeClasses names set's classes and maps each label to its class.
func labelMeClasses(set *Set, labels [][]string, files []string, opt LabelMeOptions) (map[string]uint8, error) {
	classOf := map[string]uint8{LabelMeIgnore: Ignore}
	src := opt.LabelsFile
	if src == "" {
		src = "labels"
	}
	order := opt.Labels
	if order == nil {
		seen := map[string]bool{}
		for _, ls := range labels {
			for _, l := range ls {
				if l != LabelMeIgnore && l != LabelMeBackground && !seen[l] {
					seen[l] = true
					order = append(order, l)
				}
			}
		}
		slices.Sort(order)
		order = append([]string{LabelMeBackground}, order...)
	} else {
		if len(order) > 0 && order[0] == LabelMeIgnore {
			order = order[1:]
		}
		if len(order) == 0 || order[0] != LabelMeBackground {
			return nil, errorf(src, "", "the first class must be %s (after an optional %s line), as labelme2voc wants", LabelMeBackground, LabelMeIgnore)
		}
	}
	for i, l := range order {
		if _, dup := classOf[l]; dup {
			return nil, errorf(src, "line "+strconv.Itoa(i+1), "%q is listed twice", l)
		}
		if len(set.Classes) == MaxClasses {
			return nil, errorf(src, "", "more than %d classes do not fit in a byte mask", MaxClasses)
		}
		classOf[l] = uint8(len(set.Classes))
		set.Classes = append(set.Classes, l)
	}
	for i, ls := range labels {
		for j, l := range ls {
			if _, ok := classOf[l]; !ok {
				return nil, errorf(files[i], "shape "+strconv.Itoa(j), "label %q is not in %s", l, src)
			}
		}
	}
	return classOf, nil
}

// decodeLabelMe checks one LabelMe file and returns its sample (without
// its mask), its shapes and their labels.
func decodeLabelMe(data []byte, name string, opt LabelMeOptions) (Sample, []lmDrawn, []string, error) {
	maxShapes, maxVertices := opt.MaxShapes, opt.MaxVertices
	if maxShapes <= 0 {
		maxShapes = DefaultLabelMeMaxShapes
	}
	if maxVertices <= 0 {
		maxVertices = DefaultLabelMeMaxVertices
	}
	f, err := readLabelMeJSON(data, maxShapes, maxVertices)
	if err != nil {
		return Sample{}, nil, nil, errorf(name, "", "%v", err)
	}
	if f.Shapes == nil || f.ImagePath == nil {
		return Sample{}, nil, nil, errorf(name, "", "not a LabelMe JSON file: it has no shapes or no imagePath")
	}
	maxPixels := opt.MaxPixels
	if maxPixels <= 0 {
		maxPixels = imageio.DefaultMaxPixels
	}
	w, h := f.ImageWidth, f.ImageHeight
	if w <= 0 || h <= 0 || int64(w)*int64(h) > maxPixels {
		return Sample{}, nil, nil, errorf(name, "", "imageWidth×imageHeight %dx%d is not between 1x1 and %d pixels", w, h, maxPixels)
	}
	img, err := labelMeImage(name, *f.ImagePath, opt.Root)
	if err != nil {
		return Sample{}, nil, nil, errorf(name, "imagePath", "%v", err)
	}
	if err := checkImageSize(img, w, h, maxPixels); err != nil {
		return Sample{}, nil, nil, errorf(name, "imagePath", "%v", err)
	}
	shapes := make([]lmDrawn, 0, len(f.Shapes))
	labels := make([]string, 0, len(f.Shapes))
	for i, s := range f.Shapes {
		item := "shape " + strconv.Itoa(i)
		if s.Label == nil {
			return Sample{}, nil, nil, errorf(name, item, "has no label")
		}
		item += " (" + *s.Label + ")"
		d, err := checkLabelMeShape(s, w, h, maxPixels)
		if err != nil {
			return Sample{}, nil, nil, errorf(name, item, "%v", err)
		}
		shapes = append(shapes, d)
		labels = append(labels, *s.Label)
	}
	return Sample{Image: img, Ref: name, Width: w, Height: h}, shapes, labels, nil
}

// readLabelMeJSON decodes the keys of a LabelMe file that matter here,
// shape by shape, refusing more than maxShapes shapes or maxVertices
// points before they are held: decoded, a file's numbers take several
// times the bytes they take in the file.
func readLabelMeJSON(data []byte, maxShapes, maxVertices int) (lmFile, error) {
	var f lmFile
	dec := json.NewDecoder(bytes.NewReader(data))
	bad := func(err error) (lmFile, error) {
		return lmFile{}, fmt.Errorf("not a LabelMe JSON file: %v", err)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad(fmt.Errorf("not a JSON object"))
	}
	vertices := 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		switch t {
		case "imagePath":
			err = dec.Decode(&f.ImagePath)
		case "imageWidth":
			err = dec.Decode(&f.ImageWidth)
		case "imageHeight":
			err = dec.Decode(&f.ImageHeight)
		case "shapes":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return bad(fmt.Errorf("shapes is not a list"))
			}
			f.Shapes = []lmShape{}
			for dec.More() {
				if len(f.Shapes) == maxShapes {
					return lmFile{}, fmt.Errorf("more than %d shapes", maxShapes)
				}
				var raw struct {
					lmShape
					Points json.RawMessage `json:"points"`
				}
				if err := dec.Decode(&raw); err != nil {
					return bad(err)
				}
				// Points are [[x, y], …]: one '[' each, and the list's.
				vertices += max(bytes.Count(raw.Points, []byte("[")), 1) - 1
				if vertices > maxVertices {
					return lmFile{}, fmt.Errorf("shape %d: the shapes have more than %d points", len(f.Shapes), maxVertices)
				}
				s := raw.lmShape
				if err := json.Unmarshal(raw.Points, &s.Points); err != nil && len(raw.Points) > 0 {
					return bad(fmt.Errorf("shape %d: points: %v", len(f.Shapes), err))
				}
				f.Shapes = append(f.Shapes, s)
			}
			_, err = dec.Token()
		default:
			err = skipValue(dec)
		}
		if err != nil {
			return bad(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(fmt.Errorf("data after the object"))
	}
	return f, nil
}

// labelMeImage joins a LabelMe imagePath to the JSON's folder, refusing
// absolute paths and paths out of root.
func labelMeImage(jsonFile, ref, root string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("is empty")
	}
	rel := filepath.FromSlash(strings.ReplaceAll(ref, `\`, "/"))
	if filepath.IsAbs(rel) || filepath.IsAbs(ref) || filepath.VolumeName(rel) != "" {
		return "", fmt.Errorf("%q is absolute; LabelMe writes it relative to the JSON file", ref)
	}
	p := filepath.Join(filepath.Dir(jsonFile), rel)
	if root == "" {
		root = filepath.Dir(jsonFile)
	}
	r, err := filepath.Rel(root, p)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%q points outside the data folder %s", ref, root)
	}
	// The same with the folders' symbolic links followed: a linked folder
	// inside the data folder must not lead the read out of it. The image
	// file itself may be a link, as data sets assembled from links to
	// their images are.
	realDir, errP := pathguard.Resolve(filepath.Dir(p))
	realRoot, errR := pathguard.Resolve(root)
	if errP != nil || errR != nil || !pathguard.Within(realDir, realRoot) {
		return "", fmt.Errorf("%q leads outside the data folder %s through a symbolic link", ref, root)
	}
	return p, nil
}

// checkImageSize compares an existing image's header with the JSON's
// size; a missing image is the caller's to report.
func checkImageSize(path string, w, h int, maxPixels int64) error {
	f, _, err := regfile.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	cfg, _, err := imageio.Decoder{MaxPixels: maxPixels}.Config(f, path)
	if err != nil {
		return err
	}
	if cfg.Width != w || cfg.Height != h {
		return fmt.Errorf("the image %s is %dx%d, but imageWidth×imageHeight say %dx%d", path, cfg.Width, cfg.Height, w, h)
	}
	return nil
}

// checkLabelMeShape checks a shape's type and points for a w×h image.
func checkLabelMeShape(s lmShape, w, h int, maxPixels int64) (lmDrawn, error) {
	kind := s.ShapeType
	if kind == "" {
		kind = "polygon"
	}
	switch n := len(s.Points); kind {
	case "polygon":
		if n < 3 {
			return lmDrawn{}, fmt.Errorf("a polygon needs 3 points or more, it has %d", n)
		}
	case "linestrip":
		if n < 2 {
			return lmDrawn{}, fmt.Errorf("a linestrip needs 2 points or more, it has %d", n)
		}
	case "rectangle", "circle", "line", "point", "mask":
		if n != labelMePoints[kind] {
			return lmDrawn{}, fmt.Errorf("a %s needs %d points, it has %d", kind, labelMePoints[kind], n)
		}
	default:
		return lmDrawn{}, fmt.Errorf("shape_type %q is not polygon, rectangle, circle, line, linestrip, point or mask", s.ShapeType)
	}
	d := lmDrawn{kind: kind, xy: make([]float64, 0, 2*len(s.Points))}
	for j, p := range s.Points {
		if len(p) != 2 {
			return lmDrawn{}, fmt.Errorf("point %d has %d coordinates, not 2", j, len(p))
		}
		x, y := p[0], p[1]
		// A point more than an image size outside the image is no
		// drawing of it; the bound also keeps the fills' integers small.
		if !(x >= -float64(w) && x <= 2*float64(w) && y >= -float64(h) && y <= 2*float64(h)) {
			return lmDrawn{}, fmt.Errorf("point %d (%v, %v) is far outside the %dx%d image", j, x, y, w, h)
		}
		d.xy = append(d.xy, x, y)
	}
	if kind == "circle" {
		if r := math.Hypot(d.xy[0]-d.xy[2], d.xy[1]-d.xy[3]); r > maxCircleRadius {
			return lmDrawn{}, fmt.Errorf("a circle of radius %.0f is over %d pixels", r, maxCircleRadius)
		}
	}
	if kind == "mask" {
		if s.Mask == nil {
			return lmDrawn{}, fmt.Errorf("a mask shape has no mask")
		}
		png, err := base64.StdEncoding.DecodeString(*s.Mask)
		if err != nil {
			return lmDrawn{}, fmt.Errorf("mask is not base64: %v", err)
		}
		x0, y0, x1, y1 := int(d.xy[0]), int(d.xy[1]), int(d.xy[2]), int(d.xy[3])
		if x0 < 0 || y0 < 0 || x1 < x0 || y1 < y0 || x1 >= w || y1 >= h {
			return lmDrawn{}, fmt.Errorf("mask corners (%d, %d) and (%d, %d) are not a box inside the %dx%d image", x0, y0, x1, y1, w, h)
		}
		cfg, _, err := imageio.Decoder{MaxPixels: maxPixels}.Config(bytes.NewReader(png), "mask")
		if err != nil {
			return lmDrawn{}, fmt.Errorf("mask: %v", err)
		}
		if cfg.Width != x1-x0+1 || cfg.Height != y1-y0+1 {
			return lmDrawn{}, fmt.Errorf("mask is %dx%d, but its corners span %dx%d", cfg.Width, cfg.Height, x1-x0+1, y1-y0+1)
		}
		d.mask = png
	}
	return d, nil
}

// paintLabelMe paints a file's shapes in order, later over earlier.
func paintLabelMe(shapes []lmDrawn, w, h int, file string) ([]uint8, error) {
	c := canvas{pix: make([]uint8, w*h), w: w, h: h}
	for i, s := range shapes {
		c.v = s.class
		if err := c.drawLabelMe(s); err != nil {
			return nil, errorf(file, "shape "+strconv.Itoa(i), "%v", err)
		}
	}
	return c.pix, nil
}

// drawLabelMe draws one shape as labelme's shape_to_mask does.
func (c canvas) drawLabelMe(s lmDrawn) error {
	xy := s.xy
	switch s.kind {
	case "polygon":
		c.fillPolygon(xy)
	case "rectangle":
		c.fillRectangle(min(xy[0], xy[2]), min(xy[1], xy[3]), max(xy[0], xy[2]), max(xy[1], xy[3]))
	case "circle":
		r := math.Sqrt((xy[0]-xy[2])*(xy[0]-xy[2]) + (xy[1]-xy[3])*(xy[1]-xy[3]))
		c.fillEllipse(xy[0]-r, xy[1]-r, xy[0]+r, xy[1]+r)
	case "point":
		c.fillEllipse(xy[0]-labelMePointRadius, xy[1]-labelMePointRadius, xy[0]+labelMePointRadius, xy[1]+labelMePointRadius)
	case "line", "linestrip":
		for i := 0; i+3 < len(xy); i += 2 {
			c.wideLine(xy[i], xy[i+1], xy[i+2], xy[i+3], labelMeLineWidth)
		}
	case "mask":
		return c.placeMask(s)
	}
	return nil
}

// placeMask paints a mask shape's nonzero pixels into the box whose
// top-left corner is its first point (truncated), as labelme's
// shapes_to_label does.
func (c canvas) placeMask(s lmDrawn) error {
	img, err := imageio.DecodeImage(bytes.NewReader(s.mask), "mask")
	if err != nil {
		return err
	}
	x0, y0 := int(s.xy[0]), int(s.xy[1])
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r|g|bl != 0 {
				c.pix[(y0+y-b.Min.Y)*c.w+x0+x-b.Min.X] = c.v
			}
		}
	}
	return nil
}

// IsLabelMeJSON reports whether the JSON object in r has the top-level
// keys of a LabelMe file, "shapes" and "imagePath", reading only as far
// as it must.
func IsLabelMeJSON(r io.Reader) bool {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	shapes, imagePath := false, false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := t.(string)
		shapes = shapes || key == "shapes"
		imagePath = imagePath || key == "imagePath"
		if shapes && imagePath {
			return true
		}
		if err := skipValue(dec); err != nil {
			return false
		}
	}
	return false
}

// skipValue reads one JSON value token by token, so that a large value
// is never held whole.
func skipValue(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	return jsonStream{dec}.skip(t)
}
