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
// "mask" shape per exported class (LabelMe 5.3 and later): the class's
// bounding box as its two points and the pixels inside it as a PNG, as
// LabelMe saves its own masks. A mask is exact, holes and all, where
// traced polygons would not be.
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
	Points    [2][2]int       `json:"points"`
	GroupID   *int            `json:"group_id"`
	ShapeType string          `json:"shape_type"`
	Flags     map[string]bool `json:"flags"`
	Mask      string          `json:"mask"`
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
	out := lmFileOut{Version: "5.5.0", Flags: map[string]bool{}, Shapes: []lmShapeOut{}, ImagePath: filepath.ToSlash(rel), ImageHeight: p.Height, ImageWidth: p.Width}
	for _, c := range exported(p.Labels) {
		s, err := labelMeMask(p, c)
		if err != nil {
			return err
		}
		s.Label = w.opt.Classes[c]
		out.Shapes = append(out.Shapes, s)
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

// labelMeMask is class c's mask shape: its bounding box and a grey PNG
// of the box, 255 where the class is.
func labelMeMask(p Prediction, c uint8) (lmShapeOut, error) {
	x0, y0, x1, y1 := p.Width, p.Height, -1, -1
	for y := range p.Height {
		for x := range p.Width {
			if p.Labels[y*p.Width+x] == c {
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
		}
	}
	img := image.NewGray(image.Rect(0, 0, x1-x0+1, y1-y0+1))
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			if p.Labels[y*p.Width+x] == c {
				img.Pix[(y-y0)*img.Stride+x-x0] = 255
			}
		}
	}
	var buf bytes.Buffer
	if err := imageio.EncodePNG(&buf, img); err != nil {
		return lmShapeOut{}, err
	}
	return lmShapeOut{Points: [2][2]int{{x0, y0}, {x1, y1}}, ShapeType: "mask", Flags: map[string]bool{}, Mask: base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}
