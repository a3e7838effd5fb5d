package annot

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"io"
	"path/filepath"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
)

// labelMeWriter writes a LabelMe file per image, DIR/NAME.json, with a
// polygon per connected region (trace.go), which every LabelMe version
// and converter reads: the outline through the region's boundary pixels,
// simplified within half a pixel where labelme's fill still gives back
// the same pixels. A polygon paints its region's holes too, so what is in
// a hole is drawn after it, background as a "_background_" polygon
// (labelme2voc's class 0). The few regions that no polygon reproduces
// (and regions that would have to come both before and after another)
// are "mask" shapes (LabelMe 5.3 and later): the bounding box as two
// points and the pixels inside it as a PNG, as LabelMe saves its own. So
// labelme2voc and segtune's reader give back the label map exactly. An
// image whose polygons would pass the reader's default limits
// (DefaultLabelMeMaxShapes shapes, DefaultLabelMeMaxVertices points) is
// written as one mask per class instead, as a noisy map's speckles would.
type labelMeWriter struct {
	dir, imageDir string
	opt           WriteOptions
}

type lmFileOut struct {
	Version     string          `json:"version"`
	Flags       map[string]bool `json:"flags"`
	Shapes      []lmShapeOut    `json:"shapes"`
	ImagePath   string          `json:"imagePath"`
	ImageData   *string         `json:"imageData"`
	ImageHeight int             `json:"imageHeight"`
	ImageWidth  int             `json:"imageWidth"`
}

type lmShapeOut struct {
	Label     string          `json:"label"`
	Points    [][2]int        `json:"points"`
	GroupID   *int            `json:"group_id"`
	ShapeType string          `json:"shape_type"`
	Flags     map[string]bool `json:"flags"`
	Mask      *string         `json:"mask"`
}

// NewLabelMeWriter writes into dir; a file's imagePath is the image
// (imageDir joined with the prediction's Image) relative to the file.
func NewLabelMeWriter(dir, imageDir string, opt WriteOptions) Writer {
	return &labelMeWriter{dir: dir, imageDir: imageDir, opt: opt}
}

func (w *labelMeWriter) Add(p Prediction) error {
	if err := w.opt.check(p); err != nil {
		return err
	}
	file := filepath.Join(w.dir, filepath.FromSlash(p.Name())+".json")
	rel, err := filepath.Rel(filepath.Dir(file), filepath.Join(w.imageDir, filepath.FromSlash(p.Image)))
	if err != nil {
		return err
	}
	out := lmFileOut{Version: "5.5.0", Flags: map[string]bool{}, ImagePath: filepath.ToSlash(rel), ImageHeight: p.Height, ImageWidth: p.Width}
	if out.Shapes, err = w.shapes(p); err != nil {
		return err
	}
	if err := makeParent(file); err != nil {
		return err
	}
	return atomicfile.WriteFunc(file, 0o644, func(wr io.Writer) error {
		enc := json.NewEncoder(wr)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	})
}

func (w *labelMeWriter) Close() error { return nil }

// shapes are the shapes that redraw p's label map (Ignore as
// background): traced polygons in drawing order, or one mask per class
// where those would pass the reader's default limits.
func (w *labelMeWriter) shapes(p Prediction) ([]lmShapeOut, error) {
	labels := p.Labels
	if indexOf(labels, Ignore) >= 0 {
		labels = append([]uint8(nil), labels...)
		for i, v := range labels {
			if v == Ignore {
				labels[i] = 0
			}
		}
	}
	name := func(c uint8) string {
		if c == 0 {
			return LabelMeBackground
		}
		return w.opt.Classes[c]
	}
	t := newTracer(labels, p.Width, p.Height)
	planned := t.plan()
	vertices := 0
	for _, s := range planned {
		vertices += max(len(s.poly)/2, 3)
	}
	shapes := []lmShapeOut{}
	if len(planned) > DefaultLabelMeMaxShapes || vertices > DefaultLabelMeMaxVertices {
		for _, c := range exported(labels) {
			s, err := labelMeMask(p.Width, p.Height, func(i int) bool { return labels[i] == c })
			if err != nil {
				return nil, err
			}
			s.Label = name(c)
			shapes = append(shapes, s)
		}
		return shapes, nil
	}
	for _, ps := range planned {
		s := lmShapeOut{Label: name(t.regions[ps.id].label), ShapeType: "polygon", Flags: map[string]bool{}}
		if ps.poly == nil {
			var err error
			if s, err = labelMeMask(p.Width, p.Height, func(i int) bool { return t.comp[i] == ps.id }); err != nil {
				return nil, err
			}
			s.Label = name(t.regions[ps.id].label)
		}
		for i := 0; i < len(ps.poly); i += 2 {
			s.Points = append(s.Points, [2]int{ps.poly[i], ps.poly[i+1]})
		}
		for s.ShapeType == "polygon" && len(s.Points) < 3 { // a polygon has 3 points
			s.Points = append(s.Points, s.Points[len(s.Points)-1])
		}
		shapes = append(shapes, s)
	}
	return shapes, nil
}

// labelMeMask is the mask shape of the pixels of a w×h map that in
// picks: their bounding box and a grey PNG of the box, 255 where in.
func labelMeMask(w, h int, in func(i int) bool) (lmShapeOut, error) {
	x0, y0, x1, y1 := w, h, -1, -1
	for y := range h {
		for x := range w {
			if in(y*w + x) {
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
		}
	}
	img := image.NewGray(image.Rect(0, 0, x1-x0+1, y1-y0+1))
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			if in(y*w + x) {
				img.Pix[(y-y0)*img.Stride+x-x0] = 255
			}
		}
	}
	var buf bytes.Buffer
	if err := imageio.EncodePNG(&buf, img); err != nil {
		return lmShapeOut{}, err
	}
	png := base64.StdEncoding.EncodeToString(buf.Bytes())
	return lmShapeOut{Points: [][2]int{{x0, y0}, {x1, y1}}, ShapeType: "mask", Flags: map[string]bool{}, Mask: &png}, nil
}
