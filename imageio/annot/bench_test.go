package annot

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkPolygonRLE rasterises a 200-vertex polygon (a wavy disc filling
// most of a 640×480 image, a large COCO instance).
func BenchmarkPolygonRLE(b *testing.B) {
	xy := make([]float64, 0, 400)
	for i := range 200 {
		a := 2 * math.Pi * float64(i) / 200
		r := 200 + 15*math.Sin(9*a)
		xy = append(xy, 320+r*math.Cos(a), 240+r*math.Sin(a))
	}
	m := make([]uint8, 640*480)
	for b.Loop() {
		paintRLE(m, polygonRLE(xy, 480, 640), 640, 480, 1)
	}
}

// BenchmarkLabelMePolygon fills the same polygon as BenchmarkPolygonRLE
// with Pillow's rule, as a LabelMe polygon is drawn.
func BenchmarkLabelMePolygon(b *testing.B) {
	xy := make([]float64, 0, 400)
	for i := range 200 {
		a := 2 * math.Pi * float64(i) / 200
		r := 200 + 15*math.Sin(9*a)
		xy = append(xy, 320+r*math.Cos(a), 240+r*math.Sin(a))
	}
	c := canvas{pix: make([]uint8, 640*480), w: 640, h: 480, v: 1}
	for b.Loop() {
		c.fillPolygon(xy)
	}
}

// BenchmarkDecodeCOCO decodes a COCO file of 500 640×480 images with 8
// polygon instances each, the shape of COCO's val2017 at a tenth of its
// size.
func BenchmarkDecodeCOCO(b *testing.B) {
	var imgs, anns []string
	for i := range 500 {
		imgs = append(imgs, fmt.Sprintf(`{"id":%d,"file_name":"%012d.jpg","width":640,"height":480}`, i, i))
		for j := range 8 {
			var poly []string
			for k := range 24 {
				a := 2 * math.Pi * float64(k) / 24
				poly = append(poly, fmt.Sprintf("%.2f,%.2f", 80+60*float64(j)+40*math.Cos(a), 240+90*math.Sin(a)))
			}
			anns = append(anns, fmt.Sprintf(`{"id":%d,"image_id":%d,"category_id":%d,"iscrowd":0,"segmentation":[[%s]]}`, i*8+j, i, 1+j*10, strings.Join(poly, ",")))
		}
	}
	var cats []string
	for j := range 8 {
		cats = append(cats, fmt.Sprintf(`{"id":%d,"name":"c%d"}`, 1+j*10, j))
	}
	doc := []byte(`{"images":[` + strings.Join(imgs, ",") + `],"annotations":[` + strings.Join(anns, ",") + `],"categories":[` + strings.Join(cats, ",") + `]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := DecodeCOCO(doc, "bench.json", COCOOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLabelStudioMask decodes and paints the fixture export's
// 200×150 task (two brushes).
func BenchmarkLabelStudioMask(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "labelstudio_export.json"))
	if err != nil {
		b.Fatal(err)
	}
	set, err := DecodeLabelStudio(data, "ls.json", LabelStudioOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s := set.Samples[1]
	for b.Loop() {
		if _, err := s.Mask(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLabelMeShapes traces a 512×512 predicted map of 40 overlapping
// discs of 3 classes, some in others' holes, into LabelMe polygons.
func BenchmarkLabelMeShapes(b *testing.B) {
	w, h := 512, 512
	p := Prediction{Image: "a.png", Width: w, Height: h, Labels: make([]uint8, w*h)}
	for i := range 40 {
		cx, cy, r := (i*97)%w, (i*61)%h, 10+(i*37)%60
		for y := max(cy-r, 0); y < min(cy+r, h); y++ {
			for x := max(cx-r, 0); x < min(cx+r, w); x++ {
				if (x-cx)*(x-cx)+(y-cy)*(y-cy) < r*r {
					p.Labels[y*w+x] = uint8(i % 4)
				}
			}
		}
	}
	lw := &labelMeWriter{opt: WriteOptions{Classes: []string{"bg", "a", "b", "c"}}}
	for b.Loop() {
		if _, err := lw.shapes(p); err != nil {
			b.Fatal(err)
		}
	}
}
