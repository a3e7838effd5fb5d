package annot

import (
	"fmt"
	"image/color"
	"path"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
)

// cvatWriter writes CVAT's "Segmentation mask 1.1" format, which CVAT
// imports into a task as masks (Actions → Upload annotations): labelmap.txt,
// a colour mask SegmentationClass/NAME.png per image and the image list
// ImageSets/Segmentation/default.txt. ReadCVAT reads it back exactly,
// which CVAT for images 1.1 XML, with no reader here, could not show.
type cvatWriter struct {
	dir   string
	opt   WriteOptions
	pal   imageio.Palette
	names []string
}

// NewCVATWriter writes into dir; pal colours the classes (nil or short:
// Pascal VOC colours), the background always black as CVAT's is. Two
// classes of one colour are refused: the masks could not tell them apart.
func NewCVATWriter(dir string, pal imageio.Palette, opt WriteOptions) (Writer, error) {
	voc := imageio.VOCPalette(len(opt.Classes))
	out := make(imageio.Palette, len(opt.Classes))
	owner := map[color.RGBA]string{}
	for i, name := range opt.Classes {
		c := voc[i]
		if i < len(pal) {
			c = color.RGBA{pal[i].R, pal[i].G, pal[i].B, 0xff}
		}
		if i == 0 {
			c = color.RGBA{0, 0, 0, 0xff}
		}
		if strings.ContainsAny(name, ":\n") || name == "" {
			return nil, fmt.Errorf("write CVAT annotations: class name %q cannot be a labelmap.txt label (empty, or with ':' or a line break)", name)
		}
		if other, dup := owner[c]; dup {
			return nil, fmt.Errorf("write CVAT annotations: classes %q and %q have one colour (%d,%d,%d); give a palette with distinct colours", other, name, c.R, c.G, c.B)
		}
		owner[c], out[i] = name, c
	}
	return &cvatWriter{dir: dir, opt: opt, pal: out}, nil
}

func (w *cvatWriter) Add(p Prediction) error {
	if err := w.opt.check(p); err != nil {
		return err
	}
	labels := p.Labels
	if i := indexOf(labels, Ignore); i >= 0 { // not exported: painted background
		labels = append([]uint8(nil), labels...)
		for j := i; j < len(labels); j++ {
			if labels[j] == Ignore {
				labels[j] = 0
			}
		}
	}
	file := filepath.Join(w.dir, "SegmentationClass", filepath.FromSlash(p.Name())+".png")
	if err := makeParent(file); err != nil {
		return err
	}
	if err := imageio.WriteMaskPNG(file, labels, p.Width, p.Height, w.pal); err != nil {
		return err
	}
	w.names = append(w.names, path.Clean(p.Name()))
	return nil
}

func (w *cvatWriter) Close() error {
	var lm strings.Builder
	lm.WriteString("# label:color_rgb:parts:actions\n")
	for i, name := range w.opt.Classes {
		c := w.pal[i]
		fmt.Fprintf(&lm, "%s:%d,%d,%d::\n", name, c.R, c.G, c.B)
	}
	if err := atomicfile.Write(filepath.Join(w.dir, "labelmap.txt"), []byte(lm.String()), 0o644); err != nil {
		return err
	}
	list := filepath.Join(w.dir, "ImageSets", "Segmentation", "default.txt")
	if err := makeParent(list); err != nil {
		return err
	}
	return atomicfile.Write(list, []byte(strings.Join(w.names, "\n")+"\n"), 0o644)
}

func indexOf(labels []uint8, v uint8) int {
	for i, x := range labels {
		if x == v {
			return i
		}
	}
	return -1
}
