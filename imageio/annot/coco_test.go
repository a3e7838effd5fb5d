package annot

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cocoReference is testdata/coco_reference.json, written by
// testdata/gen_coco_reference.py with COCO's reference C code (maskApi.c).
type cocoReference struct {
	Polygons []struct {
		Name   string    `json:"name"`
		H      int       `json:"h"`
		W      int       `json:"w"`
		XY     []float64 `json:"xy"`
		Counts []uint32  `json:"counts"`
		String string    `json:"string"`
		Mask   []string  `json:"mask"`
	} `json:"polygons"`
	RLE []struct {
		H      int      `json:"h"`
		W      int      `json:"w"`
		Counts []uint32 `json:"counts"`
		String string   `json:"string"`
		Mask   []string `json:"mask"`
	} `json:"rle"`
	COCO struct {
		File    json.RawMessage    `json:"file"`
		Classes []string           `json:"classes"`
		Masks   map[string][][]int `json:"masks"`
	} `json:"coco"`
}

func loadCOCOReference(t *testing.T) *cocoReference {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "coco_reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref cocoReference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	return &ref
}

func maskRows(m []uint8, w, h int) []string {
	rows := make([]string, h)
	for y := range h {
		var b strings.Builder
		for x := range w {
			b.WriteByte('0' + m[y*w+x])
		}
		rows[y] = b.String()
	}
	return rows
}

func TestPolygonRLEMatchesReference(t *testing.T) {
	ref := loadCOCOReference(t)
	if len(ref.Polygons) < 50 {
		t.Fatalf("only %d polygon cases", len(ref.Polygons))
	}
	for _, c := range ref.Polygons {
		got := polygonRLE(c.XY, c.H, c.W)
		if !slices.Equal(got, c.Counts) {
			t.Errorf("%s (%dx%d): counts %v, reference %v", c.Name, c.W, c.H, got, c.Counts)
			continue
		}
		if s := encodeRLEString(got); s != c.String {
			t.Errorf("%s: string %q, reference %q", c.Name, s, c.String)
		}
		m := make([]uint8, c.W*c.H)
		paintRLE(m, got, c.W, c.H, 1)
		if rows := maskRows(m, c.W, c.H); !slices.Equal(rows, c.Mask) {
			t.Errorf("%s: mask\n%s\nreference\n%s", c.Name, strings.Join(rows, "\n"), strings.Join(c.Mask, "\n"))
		}
	}
}

func TestRLEStringMatchesReference(t *testing.T) {
	ref := loadCOCOReference(t)
	for i, c := range ref.RLE {
		got, err := decodeRLEString(c.String, c.W*c.H)
		if err != nil {
			t.Errorf("case %d: %v", i, err)
			continue
		}
		if !slices.Equal(got, c.Counts) {
			t.Errorf("case %d: counts %v, reference %v", i, got, c.Counts)
		}
		if s := encodeRLEString(c.Counts); s != c.String {
			t.Errorf("case %d: encoded %q, reference %q", i, s, c.String)
		}
		if c.Mask != nil {
			m := make([]uint8, c.W*c.H)
			paintRLE(m, got, c.W, c.H, 1)
			if rows := maskRows(m, c.W, c.H); !slices.Equal(rows, c.Mask) {
				t.Errorf("case %d: mask differs from the reference", i)
			}
		}
	}
}

func TestRLEStringRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 28))
	for range 500 {
		n := rng.IntN(40)
		counts := make([]uint32, n)
		total := 0
		for i := range counts {
			// Mostly small runs, some over 2^20 to need many characters.
			c := rng.IntN(20)
			if rng.IntN(8) == 0 {
				c = rng.IntN(3 << 20)
			}
			if i > 0 && c == 0 {
				c = 1
			}
			counts[i] = uint32(c)
			total += c
		}
		s := encodeRLEString(counts)
		got, err := decodeRLEString(s, total)
		if err != nil || !slices.Equal(got, counts) {
			t.Fatalf("%v → %q → %v, %v", counts, s, got, err)
		}
	}
}

func TestRLEStringRejects(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 4, "sum to 0"},
		{"4", 5, "sum to 4"},     // short of the mask
		{"6", 5, "exceed"},       // past the mask
		{"0`", 5, "ends inside"}, // continuation bit on the last character
		{"0p", 5, "'p'"},         // outside '0'..'o'
		{"0 1", 5, "' '"},
		{"0\x00", 5, "'\\x00'"},
		{"@", 5, "negative"},            // first count −16
		{"12A", 100, "negative"},        // third count 1 + (−15)
		{"````````0", 5, "longer than"}, // a count of 9 characters
		{"ooooooo?", 1 << 20, "longer than"},
	} {
		_, err := decodeRLEString(c.s, c.n)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("decodeRLEString(%q, %d) = %v, want an error with %q", c.s, c.n, err, c.want)
		}
	}
}

func TestDecodeCOCOMatchesReference(t *testing.T) {
	ref := loadCOCOReference(t)
	set, err := DecodeCOCO(ref.COCO.File, "instances.json", COCOOptions{ImageDir: "imgs"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, ref.COCO.Classes) {
		t.Errorf("classes %q, want %q", set.Classes, ref.COCO.Classes)
	}
	if len(set.Samples) != 2 {
		t.Fatalf("%d samples, want 2", len(set.Samples))
	}
	for _, s := range set.Samples {
		want := ref.COCO.Masks[s.Ref]
		if want == nil {
			t.Fatalf("sample %q not in the reference", s.Ref)
		}
		if s.Image != filepath.Join("imgs", filepath.FromSlash(s.Ref)) {
			t.Errorf("image path %q for %q", s.Image, s.Ref)
		}
		m, err := s.Mask()
		if err != nil {
			t.Fatal(err)
		}
		if s.Height != len(want) || s.Width != len(want[0]) {
			t.Fatalf("%s: %dx%d, want %dx%d", s.Ref, s.Width, s.Height, len(want[0]), len(want))
		}
		for y, row := range want {
			for x, v := range row {
				if int(m[y*s.Width+x]) != v {
					t.Fatalf("%s: pixel (%d,%d) is %d, reference %d", s.Ref, x, y, m[y*s.Width+x], v)
				}
			}
		}
	}
}

// cocoDoc builds a one-image COCO file (16×12) with the given annotations.
func cocoDoc(annotations ...string) []byte {
	return []byte(`{"images":[{"id":1,"file_name":"x.jpg","width":16,"height":12}],
"categories":[{"id":5,"name":"cat"},{"id":3,"name":"dog"}],
"annotations":[` + strings.Join(annotations, ",") + `]}`)
}

func TestDecodeCOCOOptions(t *testing.T) {
	square := `{"id":1,"image_id":1,"category_id":5,"iscrowd":0,"segmentation":[[2,2,8,2,8,8,2,8]]}`
	crowd := `{"id":2,"image_id":1,"category_id":3,"iscrowd":1,"segmentation":[[5,5,12,5,12,10,5,10]]}`
	at := func(t *testing.T, opt COCOOptions, x, y int) uint8 {
		t.Helper()
		set, err := DecodeCOCO(cocoDoc(square, crowd), "c.json", opt)
		if err != nil {
			t.Fatal(err)
		}
		m, err := set.Samples[0].Mask()
		if err != nil {
			t.Fatal(err)
		}
		return m[y*16+x]
	}
	// Classes: background, dog (id 3), cat (id 5).
	if got := at(t, COCOOptions{}, 3, 3); got != 2 {
		t.Errorf("cat pixel = %d, want 2", got)
	}
	if got := at(t, COCOOptions{}, 6, 6); got != Ignore {
		t.Errorf("crowd over cat = %d, want %d (crowd is painted later)", got, Ignore)
	}
	if got := at(t, COCOOptions{CrowdAsClass: true}, 6, 6); got != 1 {
		t.Errorf("crowd as class = %d, want 1", got)
	}
	if got := at(t, COCOOptions{}, 0, 0); got != 0 {
		t.Errorf("uncovered = %d, want 0", got)
	}
	if got := at(t, COCOOptions{NoBackground: true}, 0, 0); got != Ignore {
		t.Errorf("uncovered without background = %d, want %d", got, Ignore)
	}
	if got := at(t, COCOOptions{NoBackground: true}, 3, 3); got != 1 {
		t.Errorf("cat without background = %d, want 1", got)
	}
	set, err := DecodeCOCO([]byte(`{"images":[],"annotations":[],"categories":[{"id":7,"name":"a"},{"id":0,"name":"Background"}]}`), "b.json", COCOOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, []string{"Background", "a"}) {
		t.Errorf("a category named background is class 0: got %q", set.Classes)
	}
}

func TestDecodeCOCORejectsHostileFiles(t *testing.T) {
	ann := func(seg string) string {
		return `{"id":77,"image_id":1,"category_id":5,"iscrowd":0,"segmentation":` + seg + `}`
	}
	many := strings.Repeat("1,1,", 1_000_000)
	cases := []struct {
		name, doc, want string
	}{
		{"not JSON", `{"images":[`, "not COCO JSON"},
		{"truncated string", string(cocoDoc(ann(`{"size":[12,16],"counts":"abc`))), "not COCO JSON"},
		{"unknown image", string(cocoDoc(`{"id":77,"image_id":2,"category_id":5,"segmentation":[]}`)), "annotation 77: image_id"},
		{"unknown category", string(cocoDoc(`{"id":77,"image_id":1,"category_id":4,"segmentation":[]}`)), "annotation 77: category_id"},
		{"no segmentation", string(cocoDoc(`{"id":77,"image_id":1,"category_id":5}`)), "annotation 77: segmentation: missing"},
		{"huge count", string(cocoDoc(ann(`{"size":[12,16],"counts":[0,1e18]}`))), "annotation 77: segmentation: RLE counts exceed"},
		{"negative count", string(cocoDoc(ann(`{"size":[12,16],"counts":[100,-4,96]}`))), "count 1 is -4"},
		{"fractional count", string(cocoDoc(ann(`{"size":[12,16],"counts":[100.5,91.5]}`))), "count 0 is 100.5"},
		{"counts short", string(cocoDoc(ann(`{"size":[12,16],"counts":[100,50]}`))), "sum to 150"},
		{"too many counts", string(cocoDoc(ann(`{"size":[12,16],"counts":[` + strings.Repeat("0,", 300) + `0]}`))), "301 counts"},
		{"string counts short", string(cocoDoc(ann(`{"size":[12,16],"counts":"42"}`))), "sum to"},
		{"bad string", string(cocoDoc(ann(`{"size":[12,16],"counts":"~~~"}`))), "'~'"},
		{"size mismatch", string(cocoDoc(ann(`{"size":[16,12],"counts":[192]}`))), "RLE size [16 12]"},
		{"huge coordinate", string(cocoDoc(ann(`[[1,1,1e300,1,5,5]]`))), "far outside"},
		{"negative coordinate", string(cocoDoc(ann(`[[1,1,-1e9,1,5,5]]`))), "far outside"},
		{"NaN coordinate", string(cocoDoc(ann(`[[1,1,NaN,1,5,5]]`))), "not COCO JSON"},
		{"odd coordinates", string(cocoDoc(ann(`[[1,1,4,1,5]]`))), "odd number"},
		{"long outline", string(cocoDoc(ann(`[[` + strings.Repeat("0,0,31,23,", 600) + `0,0]]`))), "outline is"},
		{"10^6 vertices", string(cocoDoc(ann(`[[` + many + `1,1]]`))), "more than 100000 vertices"},
		{"image too large", `{"images":[{"id":1,"file_name":"x.jpg","width":1000000,"height":1000000}],"annotations":[],"categories":[]}`, "image 1: size"},
		{"image escapes", `{"images":[{"id":1,"file_name":"../../etc/x.jpg","width":2,"height":2}],"annotations":[],"categories":[]}`, "not a relative path"},
		{"duplicate image", `{"images":[{"id":1,"file_name":"a.jpg","width":2,"height":2},{"id":1,"file_name":"b.jpg","width":2,"height":2}],"annotations":[],"categories":[]}`, "image 1: id appears twice"},
		{"file used twice", `{"images":[{"id":1,"file_name":"a.jpg","width":2,"height":2},{"id":2,"file_name":"./sub/../a.jpg","width":2,"height":2}],"annotations":[],"categories":[]}`, `image 2: file_name "./sub/../a.jpg" is also image 1's`},
		{"duplicate category", `{"images":[],"annotations":[],"categories":[{"id":1,"name":"a"},{"id":1,"name":"b"}]}`, "category 1: id appears twice"},
		{"too many categories", `{"images":[],"annotations":[],"categories":[` + manyCategories(255) + `]}`, "256 classes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeCOCO([]byte(c.doc), "bad.json", COCOOptions{})
			var e *Error
			if !errors.As(err, &e) || e.File != "bad.json" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an *Error naming bad.json with %q", err, c.want)
			}
		})
	}
}

func manyCategories(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"id":%d,"name":"c%d"}`, i+1, i)
	}
	return strings.Join(parts, ",")
}

func TestReadCOCOFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(p, cocoDoc(), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCOCO(p, COCOOptions{MaxFileBytes: 64}); err == nil || !strings.Contains(err.Error(), "larger than 64 bytes") {
		t.Fatalf("got %v, want the size limit", err)
	}
	if _, err := ReadCOCO(p, COCOOptions{}); err != nil {
		t.Fatal(err)
	}
}

// evenOdd is an independent rasteriser: pixel (x, y) is inside when a
// ray from its centre crosses the outline an odd number of times.
func evenOdd(xy []float64, x, y float64) bool {
	in := false
	k := len(xy) / 2
	for i, j := 0, k-1; i < k; j, i = i, i+1 {
		xi, yi, xj, yj := xy[2*i], xy[2*i+1], xy[2*j], xy[2*j+1]
		if (yi > y) != (yj > y) && x < (xj-xi)*(y-yi)/(yj-yi)+xi {
			in = !in
		}
	}
	return in
}

// distToOutline is the distance from (x, y) to the polygon's outline.
func distToOutline(xy []float64, x, y float64) float64 {
	d := math.Inf(1)
	k := len(xy) / 2
	for i, j := 0, k-1; i < k; j, i = i, i+1 {
		ax, ay, bx, by := xy[2*j], xy[2*j+1], xy[2*i], xy[2*i+1]
		dx, dy := bx-ax, by-ay
		t := 0.0
		if l := dx*dx + dy*dy; l > 0 {
			t = max(0, min(1, ((x-ax)*dx+(y-ay)*dy)/l))
		}
		d = min(d, math.Hypot(x-ax-t*dx, y-ay-t*dy))
	}
	return d
}

// The reference's fill is even–odd at pixel centres ((x+½, y+½): COCO's
// pixel (x, y) covers [x, x+1)×[y, y+1)) of an outline whose vertices and
// trace are rounded to a 1/5-pixel grid, so it differs from the exact
// even–odd fill only at pixel centres within about 0.3 pixels of the
// outline (0.305 at most over 30,000 random polygons, about 1% of their
// pixels).
func TestPolygonRLEIsEvenOddAtPixelCentres(t *testing.T) {
	const bound = 0.35 // pixels
	rng := rand.New(rand.NewPCG(2, 28))
	worst, differ, total := 0.0, 0, 0
	for range 3000 {
		w, h := 1+rng.IntN(50), 1+rng.IntN(50)
		k := 3 + rng.IntN(12)
		xy := make([]float64, 2*k)
		for i := range k {
			xy[2*i] = rng.Float64()*float64(w+4) - 2
			xy[2*i+1] = rng.Float64()*float64(h+4) - 2
		}
		m := make([]uint8, w*h)
		paintRLE(m, polygonRLE(xy, h, w), w, h, 1)
		for y := range h {
			for x := range w {
				total++
				// COCO's pixel (x, y) covers [x, x+1)×[y, y+1).
				cx, cy := float64(x)+.5, float64(y)+.5
				if (m[y*w+x] == 1) == evenOdd(xy, cx, cy) {
					continue
				}
				differ++
				d := distToOutline(xy, cx, cy)
				worst = max(worst, d)
				if d > bound {
					t.Fatalf("polygon %v in %dx%d: pixel (%d,%d) differs from the even–odd fill %.3f px from the outline", xy, w, h, x, y, d)
				}
			}
		}
	}
	t.Logf("%d of %d pixels differ from the exact even–odd fill, at most %.3f px from the outline", differ, total, worst)
}

// A label mask written as one compressed-RLE annotation per class comes
// back exactly: COCO RLE is lossless.
func TestDecodeCOCORLERoundTrip(t *testing.T) {
	const w, h = 37, 23
	rng := rand.New(rand.NewPCG(3, 28))
	want := make([]uint8, w*h)
	for i := range want {
		if i > 0 && rng.IntN(4) > 0 {
			want[i] = want[i-1] // runs, as in real masks
		} else {
			want[i] = uint8(rng.IntN(4))
		}
	}
	var anns []string
	for c := uint8(1); c < 4; c++ {
		var counts []uint32
		val, run := uint8(0), uint32(0)
		for x := range w { // column-major
			for y := range h {
				v := uint8(0)
				if want[y*w+x] == c {
					v = 1
				}
				if v != val {
					counts, val, run = append(counts, run), v, 0
				}
				run++
			}
		}
		counts = append(counts, run)
		anns = append(anns, fmt.Sprintf(`{"id":%d,"image_id":1,"category_id":%d,"iscrowd":0,"segmentation":{"size":[%d,%d],"counts":%q}}`,
			c, 10*c, h, w, encodeRLEString(counts)))
	}
	doc := fmt.Sprintf(`{"images":[{"id":1,"file_name":"m.png","width":%d,"height":%d}],"categories":[{"id":10,"name":"a"},{"id":20,"name":"b"},{"id":30,"name":"c"}],"annotations":[%s]}`,
		w, h, strings.Join(anns, ","))
	set, err := DecodeCOCO([]byte(doc), "rt.json", COCOOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := set.Samples[0].Mask()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("round trip differs:\n%s\nwant\n%s", strings.Join(maskRows(got, w, h), "\n"), strings.Join(maskRows(want, w, h), "\n"))
	}
}
