package annot

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// labelMeReference is testdata/labelme_reference.json, written by
// testdata/gen_labelme_reference.py with Pillow's ImageDraw, the calls
// labelme's shape_to_mask makes.
type labelMeReference struct {
	Pillow string `json:"pillow"`
	Cases  []struct {
		Name   string `json:"name"`
		H      int    `json:"h"`
		W      int    `json:"w"`
		Shapes []struct {
			Class     uint8       `json:"class"`
			ShapeType string      `json:"shape_type"`
			Points    [][]float64 `json:"points"`
		} `json:"shapes"`
		Mask []string `json:"mask"`
	} `json:"cases"`
}

func TestLabelMeShapesMatchPillow(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "labelme_reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref labelMeReference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) < 50 {
		t.Fatalf("%d reference cases", len(ref.Cases))
	}
	for _, c := range ref.Cases {
		var shapes []lmDrawn
		for i, s := range c.Shapes {
			d, err := checkLabelMeShape(lmShape{ShapeType: s.ShapeType, Points: s.Points}, c.W, c.H, 1<<30)
			if err != nil {
				t.Fatalf("%s: shape %d: %v", c.Name, i, err)
			}
			d.class = s.Class
			shapes = append(shapes, d)
		}
		m, err := paintLabelMe(shapes, c.W, c.H, c.Name)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if got := maskRows(m, c.W, c.H); !slices.Equal(got, c.Mask) {
			t.Errorf("%s (%dx%d): mask differs from Pillow %s's\ngot:\n%s\nwant:\n%s", c.Name, c.W, c.H, ref.Pillow,
				strings.Join(got, "\n"), strings.Join(c.Mask, "\n"))
		}
	}
}

// labelMeJSON is a LabelMe file as labelme 5 writes it.
func labelMeJSON(imagePath string, w, h int, imageData string, shapes ...string) string {
	data := "null"
	if imageData != "" {
		data = `"` + imageData + `"`
	}
	return `{
  "version": "5.4.1",
  "flags": {},
  "shapes": [` + strings.Join(shapes, ",\n") + `],
  "imagePath": "` + imagePath + `",
  "imageData": ` + data + `,
  "imageHeight": ` + strconv.Itoa(h) + `,
  "imageWidth": ` + strconv.Itoa(w) + `
}`
}

// lmShapeJSON is one shape as labelme writes it.
func lmShapeJSON(label, shapeType string, points ...[2]float64) string {
	pts := make([]string, len(points))
	for i, p := range points {
		pts[i] = fmt.Sprintf("[%v, %v]", p[0], p[1])
	}
	return `{"label": "` + label + `", "points": [` + strings.Join(pts, ", ") + `], "group_id": null, "description": "", "shape_type": "` + shapeType + `", "flags": {}, "mask": null}`
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pngBytes(t *testing.T, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadLabelMeFolder(t *testing.T) {
	root := t.TempDir()
	// a.json beside its image, imageData null; json/b.json with its image
	// in images/, reached by ../, imageData embedded.
	writePNG(t, filepath.Join(root, "a.png"), image.NewGray(image.Rect(0, 0, 8, 6)))
	b := pngBytes(t, image.NewRGBA(image.Rect(0, 0, 5, 4)))
	writeFile(t, filepath.Join(root, "images", "b.png"), string(b))
	writeFile(t, filepath.Join(root, "a.json"), labelMeJSON("a.png", 8, 6, "",
		lmShapeJSON("road", "rectangle", [2]float64{0.9, 0.2}, [2]float64{6.7, 4.8}),
		lmShapeJSON("car", "rectangle", [2]float64{5.5, 3.5}, [2]float64{3.1, 2.9}),
		lmShapeJSON("__ignore__", "rectangle", [2]float64{7, 5}, [2]float64{7, 5})))
	writeFile(t, filepath.Join(root, "json", "b.json"), labelMeJSON(`..\\images\\b.png`, 5, 4, base64.StdEncoding.EncodeToString(b),
		lmShapeJSON("tree", "rectangle", [2]float64{0, 0}, [2]float64{1, 1})))
	files := []string{filepath.Join(root, "a.json"), filepath.Join(root, "json", "b.json")}

	set, err := ReadLabelMe(files, LabelMeOptions{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"_background_", "car", "road", "tree"}; !slices.Equal(set.Classes, want) {
		t.Fatalf("classes %q, want %q", set.Classes, want)
	}
	if s := set.Samples[1]; s.Image != filepath.Join(root, "images", "b.png") || s.Ref != files[1] || s.Width != 5 || s.Height != 4 {
		t.Fatalf("sample %+v", s)
	}
	m, err := set.Samples[0].Mask()
	if err != nil {
		t.Fatal(err)
	}
	// Corners truncated, both included; car over road; __ignore__ 255.
	want := []string{
		"22222220",
		"22222220",
		"22211120",
		"22211120",
		"22222220",
		"0000000X",
	}
	got := maskRows(m, 8, 6)
	if m[5*8+7] == Ignore {
		got[5] = got[5][:7] + "X"
	}
	if !slices.Equal(got, want) {
		t.Errorf("mask\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// labels.txt as labelme2voc takes it: its order, and every label must be in it.
	set, err = ReadLabelMe(files, LabelMeOptions{Root: root, Labels: []string{"__ignore__", "_background_", "tree", "road", "car", "sky"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"_background_", "tree", "road", "car", "sky"}; !slices.Equal(set.Classes, want) {
		t.Fatalf("classes %q, want %q", set.Classes, want)
	}
	m, _ = set.Samples[0].Mask()
	if m[2*8+3] != 3 || m[1*8+1] != 2 || m[7] != 0 {
		t.Errorf("mask with labels.txt: %v", maskRows(m, 8, 6))
	}
	_, err = ReadLabelMe(files, LabelMeOptions{Root: root, Labels: []string{"_background_", "road", "tree"}, LabelsFile: "labels.txt"})
	var e *Error
	if !errors.As(err, &e) || e.File != files[0] || !strings.Contains(err.Error(), `label "car" is not in labels.txt`) {
		t.Fatalf("got %v, want the unknown label named with its file", err)
	}
	_, err = ReadLabelMe(files, LabelMeOptions{Root: root, Labels: []string{"road", "_background_"}, LabelsFile: "labels.txt"})
	if err == nil || !strings.Contains(err.Error(), "labels.txt: the first class must be _background_") {
		t.Fatalf("got %v, want labels.txt refused", err)
	}
}

func TestReadLabelMeMaskShape(t *testing.T) {
	root := t.TempDir()
	writePNG(t, filepath.Join(root, "a.png"), image.NewGray(image.Rect(0, 0, 6, 5)))
	bits := image.NewGray(image.Rect(0, 0, 3, 2))
	bits.Pix = []uint8{1, 0, 1, 0, 255, 0}
	shape := strings.Replace(lmShapeJSON("cat", "mask", [2]float64{2.7, 1.2}, [2]float64{4.9, 2.6}), `"mask": null`,
		`"mask": "`+base64.StdEncoding.EncodeToString(pngBytes(t, bits))+`"`, 1)
	writeFile(t, filepath.Join(root, "a.json"), labelMeJSON("a.png", 6, 5, "", shape))
	set, err := ReadLabelMe([]string{filepath.Join(root, "a.json")}, LabelMeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := set.Samples[0].Mask()
	if err != nil {
		t.Fatal(err)
	}
	// labelme: mask[y1:y2+1, x1:x2+1] = bitmap, corners cast to int.
	want := []string{"000000", "001010", "000100", "000000", "000000"}
	if got := maskRows(m, 6, 5); !slices.Equal(got, want) {
		t.Errorf("mask %q, want %q", got, want)
	}
}

func TestReadLabelMeRejectsHostileFiles(t *testing.T) {
	root := t.TempDir()
	writePNG(t, filepath.Join(root, "a.png"), image.NewGray(image.Rect(0, 0, 8, 6)))
	poly := func(pts string) string {
		return `{"label": "x", "points": ` + pts + `, "shape_type": "polygon"}`
	}
	many := `{"label": "x", "points": [[1,1]], "shape_type": "point"},`
	cases := []struct {
		name, doc, want string
	}{
		{"not JSON", `{"shapes": [`, "not a LabelMe JSON file"},
		{"COCO file", `{"images": [], "annotations": [], "categories": []}`, "no shapes or no imagePath"},
		{"polygon of 2 points", labelMeJSON("a.png", 8, 6, "", poly(`[[1,1],[5,5]]`)), "shape 0 (x): a polygon needs 3 points or more, it has 2"},
		{"rectangle of 3 points", labelMeJSON("a.png", 8, 6, "", lmShapeJSON("x", "rectangle", [2]float64{1, 1}, [2]float64{2, 2}, [2]float64{3, 3})), "a rectangle needs 2 points"},
		{"point of 3 coordinates", labelMeJSON("a.png", 8, 6, "", poly(`[[1,1,1],[5,5],[2,2]]`)), "point 0 has 3 coordinates"},
		{"NaN", labelMeJSON("a.png", 8, 6, "", poly(`[[1,1],[NaN,5],[2,2]]`)), "not a LabelMe JSON file"},
		{"huge coordinate", labelMeJSON("a.png", 8, 6, "", poly(`[[1,1],[1e300,5],[2,2]]`)), "far outside the 8x6 image"},
		{"huge circle", labelMeJSON("none.png", 100_000, 1000, "", lmShapeJSON("x", "circle", [2]float64{0, 0}, [2]float64{50_000, 0})), "a circle of radius 50000 is over 16384 pixels"},
		{"unknown shape type", labelMeJSON("a.png", 8, 6, "", lmShapeJSON("x", "cuboid", [2]float64{1, 1})), `shape_type "cuboid"`},
		{"no label", labelMeJSON("a.png", 8, 6, "", `{"points": [[1,1],[2,2],[3,1]]}`), "shape 0: has no label"},
		{"mask without bitmap", labelMeJSON("a.png", 8, 6, "", lmShapeJSON("x", "mask", [2]float64{1, 1}, [2]float64{2, 2})), "has no mask"},
		{"mask not base64", labelMeJSON("a.png", 8, 6, "", strings.Replace(lmShapeJSON("x", "mask", [2]float64{1, 1}, [2]float64{2, 2}), `"mask": null`, `"mask": "!!"`, 1)), "not base64"},
		{"image outside the folder", labelMeJSON("../../etc/a.png", 8, 6, ""), "points outside the data folder"},
		{"absolute image", labelMeJSON("/etc/a.png", 8, 6, ""), "is absolute"},
		{"no imagePath", `{"shapes": [], "imageHeight": 6, "imageWidth": 8}`, "no shapes or no imagePath"},
		{"size disagrees with image", labelMeJSON("a.png", 8, 7, ""), "the image " + filepath.Join(root, "a.png") + " is 8x6, but imageWidth×imageHeight say 8x7"},
		{"no size", `{"shapes": [], "imagePath": "a.png"}`, "imageWidth×imageHeight 0x0"},
		{"huge size", labelMeJSON("a.png", 1_000_000, 1_000_000, ""), "is not between 1x1 and"},
		{"too many shapes", labelMeJSON("a.png", 8, 6, "", strings.Repeat(many, 10_000)+poly(`[[1,1],[2,2],[3,1]]`)), "more than 10000 shapes"},
		{"too many points", labelMeJSON("a.png", 8, 6, "", poly(`[`+strings.Repeat("[1,1],", 20_000)+`[2,2]]`)), "more than 20000 points"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(root, "bad.json")
			writeFile(t, p, c.doc)
			_, err := ReadLabelMe([]string{p}, LabelMeOptions{Root: root})
			var e *Error
			if !errors.As(err, &e) || e.File != p || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an *Error naming %s with %q", err, p, c.want)
			}
		})
	}
	// A symbolic link in the folder that leads out of it (a hostile round
	// found one passing the "folder above, never further" rule).
	outside := t.TempDir()
	writePNG(t, filepath.Join(outside, "secret.png"), image.NewGray(image.Rect(0, 0, 8, 6)))
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(root, "linked.json")
	writeFile(t, linked, labelMeJSON("link/secret.png", 8, 6, ""))
	if _, err := ReadLabelMe([]string{linked}, LabelMeOptions{Root: root}); err == nil || !strings.Contains(err.Error(), "leads outside the data folder") {
		t.Fatalf("an image through a symbolic link out of the folder: %v", err)
	}
	p := filepath.Join(root, "big.json")
	writeFile(t, p, labelMeJSON("a.png", 8, 6, strings.Repeat("A", 200)))
	if _, err := ReadLabelMe([]string{p}, LabelMeOptions{Root: root, MaxFileBytes: 100}); err == nil || !strings.Contains(err.Error(), "larger than 100 bytes") {
		t.Fatalf("got %v, want the size limit", err)
	}
}

func TestIsLabelMeJSON(t *testing.T) {
	for doc, want := range map[string]bool{
		labelMeJSON("a.png", 2, 2, "QUJD"):                                    true,
		`{"imagePath": "a.png", "flags": {"a": [1, {"b": 2}]}, "shapes": []}`: true,
		`{"images": [], "annotations": [], "categories": []}`:                 false,
		`[{"id": 1, "data": {"image": "a.png"}, "annotations": []}]`:          false,
		`{"shapes": [], "imagePath": `:                                        true,
		`{"shapes": [`:                                                        false,
		`not json`:                                                            false,
	} {
		if got := IsLabelMeJSON(strings.NewReader(doc)); got != want {
			t.Errorf("IsLabelMeJSON(%.60q) = %v, want %v", doc, got, want)
		}
	}
}
