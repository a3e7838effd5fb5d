package annot

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/segtune/segtune/internal/atomicfile"
)

// cvatXMLWriter writes a "CVAT for images 1.1" XML file, which CVAT
// (2.x) imports into a task (Actions → Upload annotations → CVAT 1.1): an
// <image> per prediction, matched to the task's image by name, with a
// <mask> per exported class in CVAT's own RLE, which is exact. The masks
// are marked source="auto", as CVAT marks a model's annotations.
type cvatXMLWriter struct {
	path   string
	opt    WriteOptions
	images [][]byte
}

// NewCVATXMLWriter writes path (annotations.xml) on Close.
func NewCVATXMLWriter(path string, opt WriteOptions) Writer {
	return &cvatXMLWriter{path: path, opt: opt}
}

func (w *cvatXMLWriter) Add(p Prediction) error {
	if err := w.opt.check(p); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "  <image id=\"%d\" name=\"%s\" width=\"%d\" height=\"%d\">\n", len(w.images), escapeXML(p.Image), p.Width, p.Height)
	for _, c := range exported(p.Labels) {
		counts, box := cvatMaskRLE(p.Labels, p.Width, p.Height, c)
		fmt.Fprintf(&b, "    <mask label=\"%s\" source=\"auto\" occluded=\"0\" rle=\"", escapeXML(w.opt.Classes[c]))
		for i, n := range counts {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.FormatUint(uint64(n), 10))
		}
		fmt.Fprintf(&b, "\" left=\"%d\" top=\"%d\" width=\"%d\" height=\"%d\" z_order=\"0\">\n    </mask>\n", box[0], box[1], box[2], box[3])
	}
	b.WriteString("  </image>\n")
	w.images = append(w.images, b.Bytes())
	return nil
}

func (w *cvatXMLWriter) Close() error {
	if err := makeParent(w.path); err != nil {
		return err
	}
	return atomicfile.WriteFunc(w.path, 0o644, func(out io.Writer) error {
		var b strings.Builder
		b.WriteString("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<annotations>\n  <version>1.1</version>\n  <meta>\n    <task>\n")
		fmt.Fprintf(&b, "      <name>segtune predictions</name>\n      <size>%d</size>\n      <mode>annotation</mode>\n      <labels>\n", len(w.images))
		for _, name := range w.opt.Classes[1:] {
			fmt.Fprintf(&b, "        <label>\n          <name>%s</name>\n          <type>any</type>\n          <attributes>\n          </attributes>\n        </label>\n", escapeXML(name))
		}
		b.WriteString("      </labels>\n    </task>\n  </meta>\n")
		if _, err := io.WriteString(out, b.String()); err != nil {
			return err
		}
		for _, img := range w.images {
			if _, err := out.Write(img); err != nil {
				return err
			}
		}
		_, err := io.WriteString(out, "</annotations>\n")
		return err
	})
}

func escapeXML(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

// cvatMaskRLE is CVAT's RLE of class c's pixels: row by row over their
// bounding box, alternating runs of 0s and 1s, the first a run of 0s
// (empty when the box starts with the class); and the box as left, top,
// width, height.
func cvatMaskRLE(labels []uint8, w, h int, c uint8) ([]uint32, [4]int) {
	x0, y0, x1, y1 := w, h, -1, -1
	for y := range h {
		for x := range w {
			if labels[y*w+x] == c {
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
		}
	}
	var counts []uint32
	in, run := false, uint32(0)
	for y := y0; y <= y1; y++ {
		for x := x0; x <= x1; x++ {
			if v := labels[y*w+x] == c; v != in {
				counts, in, run = append(counts, run), v, 0
			}
			run++
		}
	}
	return append(counts, run), [4]int{x0, y0, x1 - x0 + 1, y1 - y0 + 1}
}
