package annot

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCVATXMLWriterRoundTrip(t *testing.T) {
	preds := writePredictions()
	file := filepath.Join(t.TempDir(), "annotations.xml")
	addAll(t, NewCVATXMLWriter(file, WriteOptions{Classes: writeClasses}), preds)
	set, err := ReadCVATXML(file, CVATXMLOptions{ImageDir: "images"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, writeClasses) {
		t.Errorf("classes %q, want %q", set.Classes, writeClasses)
	}
	checkSameMasks(t, set, preds, func(p Prediction) string { return p.Image })
	if s := set.Samples[1]; s.Image != filepath.Join("images", "sub", "blob.png") {
		t.Errorf("image %q, want images/sub/blob.png", s.Image)
	}
	data, _ := os.ReadFile(file)
	if n := bytes.Count(data, []byte("<mask ")); n != 5 { // a mask per class and image
		t.Errorf("%d <mask> elements, want 5", n)
	}
}

// A mask's RLE runs row by row over its box (CVAT's order), not down the
// columns as COCO's does.
func TestReadCVATXMLMaskOrderAndZOrder(t *testing.T) {
	xml := `<?xml version="1.0" encoding="utf-8"?>
<annotations><version>1.1</version>
<meta><task><labels>
 <label><name>a</name><type>mask</type></label>
 <label><name>b</name><type>polygon</type></label>
 <label><name>s</name><type>skeleton</type></label>
 <label><name>1</name><type>points</type><parent>s</parent></label>
</labels></task></meta>
<image id="0" name="x.png" width="4" height="3">
 <mask label="a" source="manual" occluded="0" rle="1, 2, 3" left="1" top="0" width="3" height="2" z_order="2"></mask>
 <polygon label="b" points="0,0;4,0;4,3;0,3" occluded="1" z_order="1"></polygon>
 <polyline label="b" points="0,0;3,2" z_order="9"></polyline>
 <skeleton label="s" z_order="9"><points label="1" points="1,1" occluded="0" outside="0"></points></skeleton>
</image>
</annotations>`
	set, err := decodeCVATXML(strings.NewReader(xml), "t.xml", CVATXMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"background", "a", "b"}; !slices.Equal(set.Classes, want) {
		t.Errorf("classes %q, want %q", set.Classes, want)
	}
	m, _ := set.Samples[0].Mask()
	// The polygon covers the image; the mask, over it by z_order though
	// before it in the file, sets its 3x2 box's (1,0) and (2,0): pixels
	// (2,0) and (3,0). Down the columns, it would set (1,1) and (2,0).
	want := []uint8{
		2, 2, 1, 1,
		2, 2, 2, 2,
		2, 2, 2, 2,
	}
	if !slices.Equal(m, want) {
		t.Errorf("mask %v, want %v", m, want)
	}
}

// The example of CVAT's XML format documentation (docs/other/xml_format,
// "Annotation"), read as CVAT's mask exports draw it.
func TestReadCVATXMLDocumentedExample(t *testing.T) {
	set, err := ReadCVATXML(filepath.Join("testdata", "cvat_for_images.xml"), CVATXMLOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"background", "car", "traffic_line", "wheel", "plate"}; !slices.Equal(set.Classes, want) {
		t.Errorf("classes %q, want %q", set.Classes, want)
	}
	s := set.Samples[0]
	m, err := s.Mask()
	if err != nil {
		t.Fatal(err)
	}
	at := func(x, y int) uint8 { return m[y*s.Width+x] }
	for _, c := range []struct {
		x, y int
		want uint8
	}{
		{880, 900, 4}, // the plate's box (z 4) over the car (z 1)
		{700, 600, 1}, // the car's polygon
		{10, 10, 0},   // nothing
		{294, 600, 0}, // on the traffic_line polyline, which draws nothing
		{713, 895, 1}, // the middle of the car's mask
		{707, 888, 1}, // the mask's corner is 0, but the car polygon covers it
	} {
		if got := at(c.x, c.y); got != c.want {
			t.Errorf("pixel (%d,%d) is %d, want %d", c.x, c.y, got, c.want)
		}
	}
	// The mask (z 0), under the car's polygon: its RLE's 149 ones at least.
	n := 0
	for y := 888; y < 888+15; y++ {
		for x := 707; x < 707+13; x++ {
			if at(x, y) == 1 {
				n++
			}
		}
	}
	if n < 149 {
		t.Errorf("%d car pixels in the mask's box, want at least the mask's 149", n)
	}
}

func TestReadCVATXMLRefusesHostileFiles(t *testing.T) {
	head := `<annotations><meta><task><labels><label><name>a</name></label></labels></task></meta>`
	for _, c := range []struct{ name, xml, want string }{
		{"huge image", head + `<image name="x.png" width="1000000" height="1000000"></image></annotations>`, "not between 1x1"},
		{"negative size", head + `<image name="x.png" width="-4" height="3"></image></annotations>`, "not between 1x1"},
		{"RLE longer than the box", head + `<image name="x.png" width="4" height="4"><mask label="a" rle="1, 2, 1, 5" left="0" top="0" width="2" height="2"/></image></annotations>`, "more than the box's 4 pixels"},
		{"RLE shorter than the box", head + `<image name="x.png" width="4" height="4"><mask label="a" rle="1, 2" left="0" top="0" width="2" height="2"/></image></annotations>`, "not the box's 4"},
		{"RLE with more counts than pixels", head + `<image name="x.png" width="4" height="4"><mask label="a" rle="0,0,0,0,0,0,0,4" left="0" top="0" width="2" height="2"/></image></annotations>`, "8 counts for the box's 4 pixels"},
		{"mask outside the image", head + `<image name="x.png" width="4" height="4"><mask label="a" rle="0, 4" left="3" top="0" width="2" height="2"/></image></annotations>`, "not inside the 4x4 image"},
		{"far vertex", head + `<image name="x.png" width="4" height="4"><polygon label="a" points="0,0;1e9,0;0,1"/></image></annotations>`, "far outside"},
		{"unknown label", head + `<image name="x.png" width="4" height="4"><box label="b" xtl="0" ytl="0" xbr="1" ybr="1"/></image></annotations>`, `label "b" is not in`},
		{"path out of the folder", head + `<image name="../x.png" width="4" height="4"></image></annotations>`, "not a path inside"},
		{"video", head + `<track id="0" label="a"></track></annotations>`, "CVAT for video"},
		{"not CVAT", `<svg></svg>`, "root element is <svg>"},
		{"empty", ``, "no root element"},
		{"truncated", head + `<image name="x.png" width="4" height="4">`, "not well-formed"},
		{"billion laughs", `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
			`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>` + head + `<image name="&lol3;" width="4" height="4"></image></annotations>`, "invalid character entity &lol3;"},
		{"deep nesting", head + strings.Repeat("<a>", 100_000) + strings.Repeat("</a>", 100_000) + `</annotations>`, "nested more than 32 deep"},
		{"deep nesting in meta", `<annotations><meta>` + strings.Repeat("<a>", 100_000), "nested more than 32 deep"},
	} {
		_, err := decodeCVATXML(strings.NewReader(c.xml), "hostile.xml", CVATXMLOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "hostile.xml") {
			t.Errorf("%s: err = %v, want one naming hostile.xml and saying %q", c.name, err, c.want)
		}
	}
}

// A file of many numbers is refused at MaxValues, before they are held;
// deep nesting is refused without the decoder keeping every level.
func TestReadCVATXMLBoundsMemory(t *testing.T) {
	head := `<annotations><meta><task><labels><label><name>a</name></label></labels></task></meta><image name="x.png" width="100" height="100">`
	poly := `<polygon label="a" points="` + strings.Repeat("1,1;", 99_999) + `1,1"/>`
	many := []byte(head + strings.Repeat(poly, 40) + `</image></annotations>`)
	var err error
	peak := peakHeap(func() {
		_, err = decodeCVATXML(bytes.NewReader(many), "many.xml", CVATXMLOptions{MaxValues: 1 << 20})
	})
	if err == nil || !strings.Contains(err.Error(), "more than 1048576 numbers") {
		t.Errorf("err = %v, want the number limit", err)
	}
	// 40 polygons of 200,000 numbers would be 64 MB as float64s.
	if peak > 32<<20 {
		t.Errorf("peak heap %d MB reading past the limit, want under 32", peak>>20)
	}
	deep := []byte(`<annotations>` + strings.Repeat("<abcdefghijklmnop>", 1_000_000))
	peak = peakHeap(func() { _, err = decodeCVATXML(bytes.NewReader(deep), "deep.xml", CVATXMLOptions{}) })
	if err == nil || peak > 4<<20 {
		t.Errorf("deep nesting: err = %v, peak heap %d KB; want an error under 4 MB", err, peak>>10)
	}
}
