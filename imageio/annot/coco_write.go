package annot

import (
	"encoding/json"
	"io"

	"github.com/segtune/segtune/internal/atomicfile"
)

// cocoWriter collects a COCO annotation file: an image per prediction
// and an annotation per image and exported class, whose segmentation is
// compressed RLE with iscrowd 0, as COCO-Stuff writes semantic classes
// (iscrowd 1 would make evaluators and segtune's reader ignore them).
// Categories are the classes but the background, with their class index
// as id, so that the reader gives back the same indices.
type cocoWriter struct {
	path string
	opt  WriteOptions
	file cocoOut
}

type cocoOut struct {
	Info        map[string]string `json:"info"`
	Images      []cocoImageOut    `json:"images"`
	Annotations []cocoAnnOut      `json:"annotations"`
	Categories  []cocoCatOut      `json:"categories"`
}

type cocoImageOut struct {
	ID       int    `json:"id"`
	FileName string `json:"file_name"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
}

type cocoAnnOut struct {
	ID           int        `json:"id"`
	ImageID      int        `json:"image_id"`
	CategoryID   int        `json:"category_id"`
	Segmentation cocoRLEOut `json:"segmentation"`
	Area         int        `json:"area"`
	BBox         [4]int     `json:"bbox"`
	IsCrowd      int        `json:"iscrowd"`
}

type cocoRLEOut struct {
	Size   [2]int `json:"size"`
	Counts string `json:"counts"`
}

type cocoCatOut struct {
	ID   int    `json:"id"`
	Name string `json:"name"`
}

// NewCOCOWriter writes path (annotations.json) on Close; file_name is
// each prediction's Image.
func NewCOCOWriter(path string, opt WriteOptions) Writer {
	w := &cocoWriter{path: path, opt: opt}
	w.file.Info = map[string]string{"description": "segtune predictions"}
	w.file.Images, w.file.Annotations = []cocoImageOut{}, []cocoAnnOut{}
	for i, name := range opt.Classes[min(1, len(opt.Classes)):] {
		w.file.Categories = append(w.file.Categories, cocoCatOut{ID: i + 1, Name: name})
	}
	return w
}

func (w *cocoWriter) Add(p Prediction) error {
	if err := w.opt.check(p); err != nil {
		return err
	}
	id := len(w.file.Images) + 1
	w.file.Images = append(w.file.Images, cocoImageOut{ID: id, FileName: p.Image, Width: p.Width, Height: p.Height})
	for _, c := range exported(p.Labels) {
		counts, area, box := cocoCounts(p.Labels, p.Width, p.Height, c)
		w.file.Annotations = append(w.file.Annotations, cocoAnnOut{
			ID: len(w.file.Annotations) + 1, ImageID: id, CategoryID: int(c),
			Segmentation: cocoRLEOut{Size: [2]int{p.Height, p.Width}, Counts: encodeRLEString(counts)},
			Area:         area, BBox: box,
		})
	}
	return nil
}

func (w *cocoWriter) Close() error {
	if err := makeParent(w.path); err != nil {
		return err
	}
	return atomicfile.WriteFunc(w.path, 0o644, func(out io.Writer) error {
		return json.NewEncoder(out).Encode(w.file)
	})
}

// cocoCounts is the column-major RLE of the pixels of class c, with its
// area and bounding box [x y w h].
func cocoCounts(labels []uint8, w, h int, c uint8) ([]uint32, int, [4]int) {
	var counts []uint32
	in, run, area := false, uint32(0), 0
	x0, y0, x1, y1 := w, h, -1, -1
	for x := range w {
		for y := range h {
			if v := labels[y*w+x] == c; v != in {
				counts, in, run = append(counts, run), v, 0
			}
			run++
			if in {
				area++
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
		}
	}
	return append(counts, run), area, [4]int{x0, y0, x1 - x0 + 1, y1 - y0 + 1}
}

// encodeRLEString compresses counts as pycocotools' rleToString does, the
// inverse of decodeRLEString.
func encodeRLEString(counts []uint32) string {
	var s []byte
	for i, c := range counts {
		x := int64(c)
		if i > 2 {
			x -= int64(counts[i-2])
		}
		for more := true; more; {
			ch := x & 0x1f
			x >>= 5
			if ch&0x10 != 0 {
				more = x != -1
			} else {
				more = x != 0
			}
			if more {
				ch |= 0x20
			}
			s = append(s, byte(ch+'0'))
		}
	}
	return string(s)
}
