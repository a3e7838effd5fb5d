package annot

import (
	"encoding/json"
	"io"
	"strconv"

	"github.com/segtune/segtune/internal/atomicfile"
)

// labelStudioWriter collects a Label Studio tasks file: a task per image
// whose predictions hold a brushlabels result per exported class, the
// brush in Label Studio's own RLE (as label-studio-converter's
// brush.mask2rle encodes it: every RGBA value of a drawn pixel 255).
// from_name "tag" and to_name "image" are those of Label Studio's
// "Semantic Segmentation with Masks" template.
type labelStudioWriter struct {
	path, prefix string
	opt          WriteOptions
	tasks        []lsTaskOut
}

type lsTaskOut struct {
	Data        map[string]string `json:"data"`
	Predictions []lsPredOut       `json:"predictions"`
}

type lsPredOut struct {
	ModelVersion string        `json:"model_version"`
	Result       []lsResultOut `json:"result"`
}

type lsResultOut struct {
	ID             string     `json:"id"`
	FromName       string     `json:"from_name"`
	ToName         string     `json:"to_name"`
	Type           string     `json:"type"`
	OriginalWidth  int        `json:"original_width"`
	OriginalHeight int        `json:"original_height"`
	ImageRotation  int        `json:"image_rotation"`
	Value          lsValueOut `json:"value"`
}

type lsValueOut struct {
	Format      string   `json:"format"`
	RLE         []int    `json:"rle"`
	BrushLabels []string `json:"brushlabels"`
}

// DefaultLabelStudioPrefix makes a task's image URL one of Label
// Studio's local-files storage, the image's path relative to its
// document root following.
const DefaultLabelStudioPrefix = "/data/local-files/?d="

// NewLabelStudioWriter writes path (a JSON list of tasks, importable
// with their predictions) on Close; each task's data.image is prefix
// followed by the prediction's Image.
func NewLabelStudioWriter(path, prefix string, opt WriteOptions) Writer {
	return &labelStudioWriter{path: path, prefix: prefix, opt: opt, tasks: []lsTaskOut{}}
}

func (w *labelStudioWriter) Add(p Prediction) error {
	if err := w.opt.check(p); err != nil {
		return err
	}
	pred := lsPredOut{ModelVersion: "segtune", Result: []lsResultOut{}}
	for _, c := range exported(p.Labels) {
		pred.Result = append(pred.Result, lsResultOut{
			ID: strconv.Itoa(len(w.tasks)+1) + "-" + strconv.Itoa(int(c)), FromName: "tag", ToName: "image", Type: "brushlabels",
			OriginalWidth: p.Width, OriginalHeight: p.Height,
			Value: lsValueOut{Format: "rle", RLE: encodeBrushRLE(p.Labels, c), BrushLabels: []string{w.opt.Classes[c]}},
		})
	}
	w.tasks = append(w.tasks, lsTaskOut{Data: map[string]string{"image": w.prefix + p.Image}, Predictions: []lsPredOut{pred}})
	return nil
}

func (w *labelStudioWriter) Close() error {
	if err := makeParent(w.path); err != nil {
		return err
	}
	return atomicfile.WriteFunc(w.path, 0o644, func(out io.Writer) error {
		return json.NewEncoder(out).Encode(w.tasks)
	})
}

// bitWriter writes big-endian bit fields, as @thi.ng/bitstream does.
type bitWriter struct {
	out []byte
	n   int // bits written
}

func (b *bitWriter) write(v uint32, bits int) {
	for i := bits - 1; i >= 0; i-- {
		if b.n&7 == 0 {
			b.out = append(b.out, 0)
		}
		b.out[len(b.out)-1] |= byte(v>>i&1) << (7 - b.n&7)
		b.n++
	}
}

// Brush RLE's word size and run-length field sizes, as brush.py uses.
var brushSizes = [4]int{3, 4, 8, 16}

// encodeBrushRLE encodes the pixels of class c as a brush RLE (see
// decodeBrushRLE): the RGBA values, 255 where drawn, 0 elsewhere, as
// repeat chunks only (each pixel's four values are alike, so every run
// is at least four long), each at most 2^16 values.
func encodeBrushRLE(labels []uint8, c uint8) []int {
	b := &bitWriter{}
	num := 4 * len(labels)
	b.write(uint32(num), 32)
	b.write(8-1, 5)
	for _, s := range brushSizes {
		b.write(uint32(s-1), 4)
	}
	chunk := func(n int, v uint32) {
		for n > 0 {
			m := min(n, 1<<brushSizes[3])
			t := 0
			for m-1 >= 1<<brushSizes[t] {
				t++
			}
			b.write(1, 1)
			b.write(uint32(t), 2)
			b.write(uint32(m-1), brushSizes[t])
			b.write(v, 8)
			n -= m
		}
	}
	for i := 0; i < len(labels); {
		j, drawn := i, labels[i] == c
		for j < len(labels) && (labels[j] == c) == drawn {
			j++
		}
		v := uint32(0)
		if drawn {
			v = 255
		}
		chunk(4*(j-i), v)
		i = j
	}
	out := make([]int, len(b.out))
	for i, x := range b.out {
		out[i] = int(x)
	}
	return out
}
