package annot

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
)

// DefaultCVATXMLMaxBytes is the default size limit of a CVAT XML file.
const DefaultCVATXMLMaxBytes = 2 << 30

// DefaultCVATXMLMaxValues is the default limit on the numbers a CVAT XML
// file's region shapes hold in all (polygon coordinates and mask RLE
// counts): they are kept until the masks are drawn, 8 bytes or less each.
const DefaultCVATXMLMaxValues = 16 << 20

// maxCVATXMLDepth bounds the nesting of elements: CVAT's deepest are
// eight levels down (meta, task, labels, label, attributes, attribute …).
const maxCVATXMLDepth = 32

// CVATXMLOptions controls how a "CVAT for images 1.1" XML file becomes
// masks.
type CVATXMLOptions struct {
	// ImageDir is the folder that an image's name is relative to
	// (images/ in CVAT's export).
	ImageDir string
	// MaxFileBytes limits the file's size; 0 means DefaultCVATXMLMaxBytes.
	MaxFileBytes int64
	// MaxValues limits the numbers of the file's region shapes; 0 means
	// DefaultCVATXMLMaxValues.
	MaxValues int
	// MaxPixels limits an image's width×height; 0 means
	// imageio.DefaultMaxPixels.
	MaxPixels int64
	// Subset, when set, keeps only the images of that subset (the
	// subset attribute of a project export's images); the others are
	// checked, not kept.
	Subset string
}

// cvatShape is one region shape of an image, ready to paint.
type cvatShape struct {
	label  string
	class  uint8
	z      int
	poly   []float64 // polygon, box (as its corners) and ellipse outline
	counts []uint32  // mask: row-major RLE over its box, 0s first
	box    [4]int    // mask: left, top, width, height
}

// ReadCVATXML reads a "CVAT for images 1.1" XML file (annotations.xml of
// CVAT's "CVAT for images" export). Classes are "background" (pixels no
// shape covers) then the labels of <meta> in order, skipping labels that
// cannot draw a region (tag, points, polyline, skeleton and its parts);
// a label named "background" (any case) takes class 0 instead. Without
// labels in <meta>, the shapes' labels are taken, sorted.
//
// The region shapes are drawn as CVAT's own mask exports draw them:
// polygons and boxes (rotated about their centre) filled as pycocotools
// fills polygons, <mask> as its RLE says (row-major over its box, a run
// of 0s first), ellipses as 72-point outlines; in z_order, and in file
// order within one z_order. Polylines, points, tags, skeletons and
// cuboids draw nothing; occluded changes nothing. Everything is checked
// before it returns: the XML (no DTD entities, nesting at most 32 deep),
// each image's size against MaxPixels, each shape's coordinates, a mask's
// box inside its image and its RLE summing to the box's pixels, and the
// numbers held in all against MaxValues. A video export (<track>) is
// refused.
func ReadCVATXML(path string, opt CVATXMLOptions) (*Set, error) {
	limit := opt.MaxFileBytes
	if limit <= 0 {
		limit = DefaultCVATXMLMaxBytes
	}
	f, err := regfile.OpenLimit(path, limit)
	if err != nil {
		return nil, fmt.Errorf("read CVAT XML: %w", err)
	}
	defer f.Close()
	return decodeCVATXML(f, path, opt)
}

// cvatXMLReader walks one file's elements.
type cvatXMLReader struct {
	file      string
	opt       CVATXMLOptions
	dec       *xml.Decoder
	depth     int
	values    int
	maxValues int
	maxPixels int64
}

func decodeCVATXML(r io.Reader, file string, opt CVATXMLOptions) (*Set, error) {
	x := &cvatXMLReader{file: file, opt: opt, dec: xml.NewDecoder(r), maxValues: opt.MaxValues, maxPixels: opt.MaxPixels}
	// Strict, with no entity map: a DTD's entities are not expanded, and
	// a reference to one is a syntax error.
	x.dec.Strict = true
	if x.maxValues <= 0 {
		x.maxValues = DefaultCVATXMLMaxValues
	}
	if x.maxPixels <= 0 {
		x.maxPixels = imageio.DefaultMaxPixels
	}
	root, err := x.next()
	if errors.Is(err, errEnd) {
		return nil, errorf(file, "", "not a CVAT XML file: it has no root element")
	}
	if err != nil {
		return nil, err
	}
	if root.Name.Local != "annotations" {
		return nil, errorf(file, "", "not a CVAT XML file: the root element is <%s>, not <annotations>", root.Name.Local)
	}
	set := &Set{Source: file}
	var labels []string
	var shapes [][]cvatShape
	for {
		el, err := x.next()
		if errors.Is(err, errEnd) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch el.Name.Local {
		case "meta":
			if labels, err = x.meta(); err != nil {
				return nil, err
			}
		case "image":
			s, ss, err := x.image(el)
			if err != nil {
				return nil, err
			}
			if subset, _ := attr(el, "subset"); opt.Subset != "" && subset != opt.Subset {
				continue
			}
			set.Samples = append(set.Samples, s)
			shapes = append(shapes, ss)
		case "track":
			return nil, errorf(file, "", "has <track> elements: this is a CVAT for video export; export the task as CVAT for images 1.1")
		default:
			if err := x.skip(); err != nil {
				return nil, err
			}
		}
	}
	if len(set.Samples) == 0 {
		if opt.Subset != "" {
			return nil, errorf(file, "", "has no <image> of subset %q", opt.Subset)
		}
		return nil, errorf(file, "", "has no <image> elements")
	}
	classOf, err := cvatXMLClasses(set, labels, shapes)
	if err != nil {
		return nil, err
	}
	for i := range set.Samples {
		s, ss := &set.Samples[i], shapes[i]
		for j := range ss {
			ss[j].class = classOf[ss[j].label]
		}
		slices.SortStableFunc(ss, func(a, b cvatShape) int { return a.z - b.z })
		w, h := s.Width, s.Height
		s.mask = func() ([]uint8, error) { return paintCVATXML(ss, w, h), nil }
	}
	return set, nil
}

// errEnd is the end of the element whose children next walks.
var errEnd = errors.New("end of element")

// next returns the next child element's start, or errEnd at its parent's
// end. Text, comments and directives are skipped; a DOCTYPE's entities
// are never expanded.
func (x *cvatXMLReader) next() (xml.StartElement, error) {
	for {
		t, err := x.dec.Token()
		if err == io.EOF {
			return xml.StartElement{}, errEnd
		}
		if err != nil {
			return xml.StartElement{}, x.xmlError(err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			if err := x.enter(); err != nil {
				return xml.StartElement{}, err
			}
			return t, nil
		case xml.EndElement:
			x.depth--
			return xml.StartElement{}, errEnd
		}
	}
}

// enter counts an element started, refusing nesting past
// maxCVATXMLDepth: the decoder would keep every open element's name.
func (x *cvatXMLReader) enter() error {
	x.depth++
	if x.depth > maxCVATXMLDepth {
		_, line := x.dec.InputPos()
		return errorf(x.file, "line "+strconv.Itoa(line), "elements nested more than %d deep", maxCVATXMLDepth)
	}
	return nil
}

func (x *cvatXMLReader) xmlError(err error) error {
	var syn *xml.SyntaxError
	if errors.As(err, &syn) {
		return errorf(x.file, "line "+strconv.Itoa(syn.Line), "not well-formed XML: %s", syn.Msg)
	}
	return fmt.Errorf("read CVAT XML %s: %w", x.file, err)
}

// skip reads up to the end of the element just started.
func (x *cvatXMLReader) skip() error {
	for {
		_, err := x.next()
		if errors.Is(err, errEnd) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := x.skip(); err != nil {
			return err
		}
	}
}

// text reads the character data of the element just started, which has
// no children that matter; at most 4096 bytes are kept.
func (x *cvatXMLReader) text() (string, error) {
	var b strings.Builder
	for {
		t, err := x.dec.Token()
		if err != nil {
			return "", x.xmlError(err)
		}
		switch t := t.(type) {
		case xml.CharData:
			if b.Len()+len(t) <= 4096 {
				b.Write(t)
			}
		case xml.StartElement:
			if err := x.enter(); err != nil {
				return "", err
			}
			if err := x.skip(); err != nil {
				return "", err
			}
		case xml.EndElement:
			x.depth--
			return strings.TrimSpace(b.String()), nil
		}
	}
}

// meta reads <meta>'s labels (under <task>, <job> or <project>).
func (x *cvatXMLReader) meta() ([]string, error) {
	var labels []string
	var walk func() error
	walk = func() error {
		for {
			el, err := x.next()
			if errors.Is(err, errEnd) {
				return nil
			}
			if err != nil {
				return err
			}
			if el.Name.Local != "label" {
				if err := walk(); err != nil {
					return err
				}
				continue
			}
			name, kind, parent, err := x.label()
			if err != nil {
				return err
			}
			switch {
			case name == "" || parent != "":
			case kind == "tag" || kind == "points" || kind == "polyline" || kind == "skeleton" || kind == "cuboid":
			case slices.Contains(labels, name):
				// A project's meta may list its labels again per task.
			default:
				labels = append(labels, name)
			}
		}
	}
	return labels, walk()
}

// label reads a <label>'s name, type and parent.
func (x *cvatXMLReader) label() (name, kind, parent string, err error) {
	for {
		el, err := x.next()
		if errors.Is(err, errEnd) {
			return name, kind, parent, nil
		}
		if err != nil {
			return "", "", "", err
		}
		var v *string
		switch el.Name.Local {
		case "name":
			v = &name
		case "type":
			v = &kind
		case "parent":
			v = &parent
		default:
			if err := x.skip(); err != nil {
				return "", "", "", err
			}
			continue
		}
		if *v, err = x.text(); err != nil {
			return "", "", "", err
		}
	}
}

func attr(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}

// image reads an <image> and its region shapes.
func (x *cvatXMLReader) image(el xml.StartElement) (Sample, []cvatShape, error) {
	name, _ := attr(el, "name")
	item := "image " + strconv.Quote(name)
	w, errW := intAttr(el, "width")
	h, errH := intAttr(el, "height")
	if errW != nil || errH != nil || w <= 0 || h <= 0 || int64(w)*int64(h) > x.maxPixels {
		ws, _ := attr(el, "width")
		hs, _ := attr(el, "height")
		return Sample{}, nil, errorf(x.file, item, "width×height %q×%q is not between 1x1 and %d pixels", ws, hs, x.maxPixels)
	}
	if name == "" {
		return Sample{}, nil, errorf(x.file, item, "has no name")
	}
	// A project export keeps each subset's images in images/SUBSET/.
	ref := name
	if subset, _ := attr(el, "subset"); subset != "" {
		ref = subset + "/" + name
	}
	img, err := joinImage(x.opt.ImageDir, ref)
	if err != nil {
		return Sample{}, nil, errorf(x.file, item, "name: %v", err)
	}
	var shapes []cvatShape
	for i := 0; ; i++ {
		s, err := x.next()
		if errors.Is(err, errEnd) {
			break
		}
		if err != nil {
			return Sample{}, nil, err
		}
		sh, ok, err := x.shape(s, w, h)
		if err != nil {
			return Sample{}, nil, errorf(x.file, fmt.Sprintf("%s, shape %d (<%s>)", item, i, s.Name.Local), "%v", err)
		}
		if err := x.skip(); err != nil {
			return Sample{}, nil, err
		}
		if ok {
			shapes = append(shapes, sh)
		}
	}
	return Sample{Image: img, Ref: name, Width: w, Height: h}, shapes, nil
}

func intAttr(el xml.StartElement, name string) (int, error) {
	s, _ := attr(el, name)
	return strconv.Atoi(strings.TrimSpace(s))
}

func floatAttr(el xml.StartElement, name string) (float64, error) {
	s, ok := attr(el, name)
	if !ok {
		return 0, fmt.Errorf("has no %s", name)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s %q is not a finite number", name, s)
	}
	return v, nil
}

// shape checks one shape of a w×h image; ok is false for shapes that
// draw no region.
func (x *cvatXMLReader) shape(el xml.StartElement, w, h int) (cvatShape, bool, error) {
	kind := el.Name.Local
	if kind != "polygon" && kind != "box" && kind != "mask" && kind != "ellipse" {
		return cvatShape{}, false, nil
	}
	label, ok := attr(el, "label")
	if !ok || label == "" {
		return cvatShape{}, false, fmt.Errorf("has no label")
	}
	s := cvatShape{label: label}
	if z, ok := attr(el, "z_order"); ok {
		v, err := strconv.Atoi(strings.TrimSpace(z))
		if err != nil {
			return cvatShape{}, false, fmt.Errorf("z_order %q is not a whole number", z)
		}
		s.z = v
	}
	var err error
	switch kind {
	case "polygon":
		s.poly, err = x.points(el, w, h)
	case "box":
		s.poly, err = x.box(el, w, h)
	case "ellipse":
		s.poly, err = x.ellipse(el, w, h)
	case "mask":
		s.counts, s.box, err = x.mask(el, w, h)
	}
	return s, err == nil, err
}

// spend counts n more numbers held against the file's budget.
func (x *cvatXMLReader) spend(n int) error {
	x.values += n
	if x.values > x.maxValues {
		return fmt.Errorf("the file's shapes hold more than %d numbers", x.maxValues)
	}
	return nil
}

// checkPolygon refuses vertices far outside a w×h image and outlines far
// longer than it, which would be no drawing of it.
func checkPolygon(p []float64, w, h int) error {
	for j := 0; j < len(p); j += 2 {
		if !(p[j] >= -float64(w) && p[j] <= 2*float64(w) && p[j+1] >= -float64(h) && p[j+1] <= 2*float64(h)) {
			return fmt.Errorf("vertex %d (%v, %v) is far outside the %dx%d image", j/2, p[j], p[j+1], w, h)
		}
	}
	if per := polygonPerimeter(p); per > maxPerimeterRatio*float64(w+h) {
		return fmt.Errorf("the outline is %.0f pixels long, over %d times the image's width plus height", per, maxPerimeterRatio)
	}
	return nil
}

// points reads a polygon's "x0,y0;x1,y1;…".
func (x *cvatXMLReader) points(el xml.StartElement, w, h int) ([]float64, error) {
	s, _ := attr(el, "points")
	n := strings.Count(s, ";") + 1
	if n > DefaultMaxVertices {
		return nil, fmt.Errorf("more than %d points", DefaultMaxVertices)
	}
	if err := x.spend(2 * n); err != nil {
		return nil, err
	}
	p := make([]float64, 0, 2*n)
	for i, pair := range strings.Split(s, ";") {
		xs, ys, ok := strings.Cut(pair, ",")
		fx, errX := strconv.ParseFloat(strings.TrimSpace(xs), 64)
		fy, errY := strconv.ParseFloat(strings.TrimSpace(ys), 64)
		if !ok || errX != nil || errY != nil {
			return nil, fmt.Errorf("point %d %q is not x,y", i, pair)
		}
		p = append(p, fx, fy)
	}
	if len(p) < 6 {
		return nil, fmt.Errorf("a polygon needs 3 points or more, it has %d", len(p)/2)
	}
	return p, checkPolygon(p, w, h)
}

// rotated turns corners (x,y pairs) by deg degrees about (cx, cy), as
// CVAT's RotatedBoxesToPolygons does.
func rotated(p []float64, deg, cx, cy float64) {
	if deg == 0 {
		return
	}
	sin, cos := math.Sincos(deg * math.Pi / 180)
	for i := 0; i < len(p); i += 2 {
		dx, dy := p[i]-cx, p[i+1]-cy
		p[i], p[i+1] = cx+cos*dx-sin*dy, cy+sin*dx+cos*dy
	}
}

// box reads a box as its four corners, turned by its rotation.
func (x *cvatXMLReader) box(el xml.StartElement, w, h int) ([]float64, error) {
	var v [4]float64
	for i, name := range []string{"xtl", "ytl", "xbr", "ybr"} {
		var err error
		if v[i], err = floatAttr(el, name); err != nil {
			return nil, err
		}
	}
	p := []float64{v[0], v[1], v[2], v[1], v[2], v[3], v[0], v[3]}
	if r, ok := attr(el, "rotation"); ok {
		deg, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
		if err != nil || math.IsNaN(deg) || math.IsInf(deg, 0) {
			return nil, fmt.Errorf("rotation %q is not a number", r)
		}
		rotated(p, deg, (v[0]+v[2])/2, (v[1]+v[3])/2)
	}
	if err := x.spend(len(p)); err != nil {
		return nil, err
	}
	return p, checkPolygon(p, w, h)
}

// ellipseVertices is how many points an ellipse's outline is drawn with.
const ellipseVertices = 72

// ellipse reads cx, cy, rx, ry and rotation as CVAT writes them, and
// returns the outline as a polygon: centre and radii rounded to whole
// pixels as CVAT's EllipsesToMasks rounds them before OpenCV fills the
// ellipse. OpenCV's own fill is not reproduced: edge pixels may differ.
func (x *cvatXMLReader) ellipse(el xml.StartElement, w, h int) ([]float64, error) {
	var v [4]float64
	for i, name := range []string{"cx", "cy", "rx", "ry"} {
		var err error
		if v[i], err = floatAttr(el, name); err != nil {
			return nil, err
		}
	}
	if v[2] < 0 || v[3] < 0 || v[2] > 2*float64(w+h) || v[3] > 2*float64(w+h) {
		return nil, fmt.Errorf("radii %v, %v are not between 0 and twice the image's width plus height", v[2], v[3])
	}
	deg := 0.0
	if r, ok := attr(el, "rotation"); ok {
		var err error
		if deg, err = strconv.ParseFloat(strings.TrimSpace(r), 64); err != nil || math.IsNaN(deg) || math.IsInf(deg, 0) {
			return nil, fmt.Errorf("rotation %q is not a number", r)
		}
	}
	cx, cy, rx, ry := math.Round(v[0]), math.Round(v[1]), math.Round(v[2]), math.Round(v[3])
	p := make([]float64, 0, 2*ellipseVertices)
	for i := range ellipseVertices {
		sin, cos := math.Sincos(2 * math.Pi * float64(i) / ellipseVertices)
		// Pixel centres are at +0.5 in the polygon fill's coordinates.
		p = append(p, cx+0.5+rx*cos, cy+0.5+ry*sin)
	}
	rotated(p, deg, cx+0.5, cy+0.5)
	if err := x.spend(len(p)); err != nil {
		return nil, err
	}
	return p, checkPolygon(p, w, h)
}

// mask reads a <mask>'s box and RLE: counts of alternating 0s and 1s,
// row by row over the box, the first a (possibly empty) run of 0s,
// summing to the box's pixels.
func (x *cvatXMLReader) mask(el xml.StartElement, w, h int) ([]uint32, [4]int, error) {
	var b [4]int
	for i, name := range []string{"left", "top", "width", "height"} {
		v, err := intAttr(el, name)
		if err != nil {
			s, _ := attr(el, name)
			return nil, b, fmt.Errorf("%s %q is not a whole number", name, s)
		}
		b[i] = v
	}
	if b[0] < 0 || b[1] < 0 || b[2] <= 0 || b[3] <= 0 || b[2] > w-b[0] || b[3] > h-b[1] {
		return nil, b, fmt.Errorf("the mask's box (left %d, top %d, %dx%d) is not inside the %dx%d image", b[0], b[1], b[2], b[3], w, h)
	}
	s, _ := attr(el, "rle")
	n := b[2] * b[3]
	if k := strings.Count(s, ",") + 1; k > n+1 {
		return nil, b, fmt.Errorf("the RLE has %d counts for the box's %d pixels", k, n)
	}
	if err := x.spend(strings.Count(s, ",") + 1); err != nil {
		return nil, b, err
	}
	counts := make([]uint32, 0, strings.Count(s, ",")+1)
	sum := 0
	for i, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 0 {
			return nil, b, fmt.Errorf("RLE count %d %q is not a whole number ≥ 0", i, strings.TrimSpace(f))
		}
		if c > n-sum {
			return nil, b, fmt.Errorf("the RLE counts more than the box's %d pixels (at count %d)", n, i)
		}
		sum += c
		counts = append(counts, uint32(c))
	}
	if sum != n {
		return nil, b, fmt.Errorf("the RLE counts %d pixels, not the box's %d", sum, n)
	}
	return counts, b, nil
}

// cvatXMLClasses names set's classes and maps each label to its class.
func cvatXMLClasses(set *Set, labels []string, shapes [][]cvatShape) (map[string]uint8, error) {
	if labels == nil {
		seen := map[string]bool{}
		for _, ss := range shapes {
			for _, s := range ss {
				if !seen[s.label] {
					seen[s.label] = true
					labels = append(labels, s.label)
				}
			}
		}
		slices.Sort(labels)
	}
	set.Classes = []string{"background"}
	if i := slices.IndexFunc(labels, func(l string) bool { return strings.EqualFold(l, "background") }); i >= 0 {
		set.Classes[0] = labels[i]
		labels = slices.Delete(slices.Clone(labels), i, i+1)
	}
	if len(labels)+1 > MaxClasses {
		return nil, errorf(set.Source, "meta", "%d labels do not fit in a byte mask (at most %d)", len(labels), MaxClasses-1)
	}
	set.Classes = append(set.Classes, labels...)
	classOf := map[string]uint8{}
	for i, l := range set.Classes {
		classOf[l] = uint8(i)
	}
	for i, ss := range shapes {
		for j, s := range ss {
			if _, ok := classOf[s.label]; !ok {
				return nil, errorf(set.Source, fmt.Sprintf("image %q, region %d", set.Samples[i].Ref, j), "label %q is not in <meta>'s labels", s.label)
			}
		}
	}
	return classOf, nil
}

// paintCVATXML paints an image's region shapes in order, later over
// earlier.
func paintCVATXML(shapes []cvatShape, w, h int) []uint8 {
	m := make([]uint8, w*h)
	for _, s := range shapes {
		if s.counts == nil {
			paintRLE(m, polygonRLE(s.poly, h, w), w, h, s.class)
			continue
		}
		left, top, bw := s.box[0], s.box[1], s.box[2]
		i := 0
		for k, c := range s.counts {
			if k%2 == 1 {
				for j := i; j < i+int(c); j++ {
					m[(top+j/bw)*w+left+j%bw] = s.class
				}
			}
			i += int(c)
		}
	}
	return m
}

// IsCVATXML reports whether the XML in r has <annotations> as its root
// element, reading no further than that element's start.
func IsCVATXML(r io.Reader) bool {
	dec := xml.NewDecoder(r)
	for {
		t, err := dec.Token()
		if err != nil {
			return false
		}
		if el, ok := t.(xml.StartElement); ok {
			return el.Name.Local == "annotations"
		}
	}
}

// CVATXMLSubsets lists the subsets that a CVAT XML file's images name
// (a project export's train, val …), in order of appearance, reading
// the file as a stream; a task export's images name none.
func CVATXMLSubsets(path string) ([]string, error) {
	f, err := regfile.OpenLimit(path, DefaultCVATXMLMaxBytes)
	if err != nil {
		return nil, fmt.Errorf("read CVAT XML: %w", err)
	}
	defer f.Close()
	x := &cvatXMLReader{file: path, dec: xml.NewDecoder(f)}
	var subsets []string
	for {
		t, err := x.dec.Token()
		if err == io.EOF {
			return subsets, nil
		}
		if err != nil {
			return nil, x.xmlError(err)
		}
		switch t := t.(type) {
		case xml.StartElement:
			if err := x.enter(); err != nil {
				return nil, err
			}
			if s, ok := attr(t, "subset"); ok && t.Name.Local == "image" && !slices.Contains(subsets, s) {
				subsets = append(subsets, s)
			}
		case xml.EndElement:
			x.depth--
		}
	}
}
