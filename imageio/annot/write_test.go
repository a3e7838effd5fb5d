package annot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
)

var writeClasses = []string{"background", "person", "car", "tree"}

// writePredictions are small label maps: several classes, several regions
// of one class, regions on the border, a blob with a hole, an image with
// nothing but background, and one in a sub-folder.
func writePredictions() []Prediction {
	rects := Prediction{Image: "rects.jpg", Width: 13, Height: 9}
	rects.Labels = make([]uint8, 13*9)
	fill := func(p *Prediction, x0, y0, x1, y1 int, c uint8) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				p.Labels[y*p.Width+x] = c
			}
		}
	}
	fill(&rects, 0, 0, 4, 3, 1)   // touches the top-left corner
	fill(&rects, 9, 5, 13, 9, 1)  // a second region, bottom-right corner
	fill(&rects, 5, 1, 8, 8, 2)   // between them
	fill(&rects, 0, 6, 2, 9, 3)   // bottom-left
	fill(&rects, 12, 0, 13, 1, 3) // one pixel, top-right
	blob := Prediction{Image: "sub/blob.png", Width: 40, Height: 30}
	blob.Labels = make([]uint8, 40*30)
	for y := range 30 {
		for x := range 40 {
			dx, dy := float64(x-14), float64(y-12)
			switch r := dx*dx + dy*dy; {
			case r < 16: // the hole
			case r < 100:
				blob.Labels[y*40+x] = 2
			case (x-33)*(x-33)+(y-25)*(y-25) < 40: // cut by the border
				blob.Labels[y*40+x] = 3
			}
		}
	}
	empty := Prediction{Image: "empty.jpg", Width: 5, Height: 4, Labels: make([]uint8, 20)}
	return []Prediction{rects, blob, empty}
}

func addAll(t *testing.T, w Writer, preds []Prediction) {
	t.Helper()
	for _, p := range preds {
		if err := w.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// checkSameMasks compares what a reader read with the predictions, by
// ref (how the format names each image).
func checkSameMasks(t *testing.T, set *Set, preds []Prediction, ref func(Prediction) string) {
	t.Helper()
	if len(set.Samples) != len(preds) {
		t.Fatalf("read %d samples, wrote %d", len(set.Samples), len(preds))
	}
	for _, p := range preds {
		i := slices.IndexFunc(set.Samples, func(s Sample) bool { return s.Ref == ref(p) })
		if i < 0 {
			t.Fatalf("no sample %q read back", ref(p))
		}
		s := set.Samples[i]
		m, err := s.Mask()
		if err != nil {
			t.Fatal(err)
		}
		if s.Width != p.Width || s.Height != p.Height || !slices.Equal(m, p.Labels) {
			t.Errorf("%s: read back\n%s\nwrote\n%s", p.Image, strings.Join(maskRows(m, s.Width, s.Height), "\n"), strings.Join(maskRows(p.Labels, p.Width, p.Height), "\n"))
		}
	}
}

func TestCOCOWriterRoundTrip(t *testing.T) {
	preds := writePredictions()
	file := filepath.Join(t.TempDir(), "annotations.json")
	addAll(t, NewCOCOWriter(file, WriteOptions{Classes: writeClasses}), preds)
	set, err := ReadCOCO(file, COCOOptions{ImageDir: "imgs"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, writeClasses) {
		t.Errorf("classes %q, want %q", set.Classes, writeClasses)
	}
	checkSameMasks(t, set, preds, func(p Prediction) string { return p.Image })
	// Background is no annotation, and segmentations are not crowds.
	var f struct {
		Annotations []struct {
			CategoryID int `json:"category_id"`
			IsCrowd    int `json:"iscrowd"`
		}
	}
	data, _ := os.ReadFile(file)
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Annotations) != 5 { // rects: 3 classes; blob: 2; empty: none
		t.Errorf("%d annotations, want 5", len(f.Annotations))
	}
	for _, a := range f.Annotations {
		if a.IsCrowd != 0 || a.CategoryID < 1 || a.CategoryID > 3 {
			t.Errorf("annotation %+v: want iscrowd 0 and a category 1..3", a)
		}
	}
}

func TestLabelStudioWriterRoundTrip(t *testing.T) {
	preds := writePredictions()
	file := filepath.Join(t.TempDir(), "tasks.json")
	addAll(t, NewLabelStudioWriter(file, DefaultLabelStudioPrefix, WriteOptions{Classes: writeClasses}), preds)
	// Label Studio shows predictions for an annotator to accept, which
	// makes them the task's annotation: as an export, that is what the
	// reader reads.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := json.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	for i, task := range tasks {
		task["id"] = i + 1
		task["annotations"] = task["predictions"]
		delete(task, "predictions")
	}
	exported, _ := json.Marshal(tasks)
	set, err := DecodeLabelStudio(exported, file, LabelStudioOptions{ImageDir: "imgs", Labels: writeClasses[1:]})
	if err != nil {
		t.Fatal(err)
	}
	// The empty image has no brush, so no size: Label Studio's own
	// export of it reads the same way, as an unlabelled task.
	if want := []string{"/data/local-files/?d=empty.jpg"}; !slices.Equal(set.Unlabelled, want) {
		t.Errorf("unlabelled %q, want %q", set.Unlabelled, want)
	}
	checkSameMasks(t, set, preds[:2], func(p Prediction) string { return DefaultLabelStudioPrefix + p.Image })
}

func TestCVATWriterRoundTrip(t *testing.T) {
	preds := writePredictions()
	dir := t.TempDir()
	w, err := NewCVATWriter(dir, nil, WriteOptions{Classes: writeClasses})
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, w, preds)
	set, err := ReadCVAT(dir, CVATOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, writeClasses) {
		t.Errorf("classes %q, want %q", set.Classes, writeClasses)
	}
	checkSameMasks(t, set, preds, Prediction.Name)
	list, _ := os.ReadFile(filepath.Join(dir, "ImageSets", "Segmentation", "default.txt"))
	if string(list) != "rects\nsub/blob\nempty\n" {
		t.Errorf("default.txt is %q", list)
	}
}

func TestCVATWriterRefusesSharedColours(t *testing.T) {
	pal := imageio.Palette{{0, 0, 0, 255}, {1, 2, 3, 255}, {1, 2, 3, 255}}
	_, err := NewCVATWriter(t.TempDir(), pal, WriteOptions{Classes: []string{"bg", "a", "b"}})
	if err == nil || !strings.Contains(err.Error(), `"a" and "b"`) {
		t.Errorf("err = %v, want the two classes of one colour named", err)
	}
}

func TestLabelMeWriterRoundTrip(t *testing.T) {
	preds := writePredictions()
	root := t.TempDir()
	images, out := filepath.Join(root, "images"), filepath.Join(root, "labelme")
	// The images exist, so the reader checks their size against the file's.
	for _, p := range preds {
		f := filepath.Join(images, filepath.FromSlash(p.Name())+".png")
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := imageio.WriteMaskPNG(f, make([]uint8, p.Width*p.Height), p.Width, p.Height, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i := range preds {
		preds[i].Image = preds[i].Name() + ".png"
	}
	addAll(t, NewLabelMeWriter(out, images, WriteOptions{Classes: writeClasses}), preds)
	var files []string
	for _, p := range preds {
		files = append(files, filepath.Join(out, filepath.FromSlash(p.Name())+".json"))
	}
	set, err := ReadLabelMe(files, LabelMeOptions{Root: root, Labels: append([]string{"_background_"}, writeClasses[1:]...)})
	if err != nil {
		t.Fatal(err)
	}
	checkSameMasks(t, set, preds, func(p Prediction) string { return filepath.Join(out, filepath.FromSlash(p.Name())+".json") })
	for i, s := range set.Samples {
		if want := filepath.Join(images, filepath.FromSlash(preds[i].Image)); s.Image != want {
			t.Errorf("imagePath leads to %s, want %s", s.Image, want)
		}
	}
}

func TestWritersRefuseBadPredictions(t *testing.T) {
	opt := WriteOptions{Classes: writeClasses}
	for _, c := range []struct {
		p    Prediction
		want string
	}{
		{Prediction{Image: "a.jpg", Width: 2, Height: 2, Labels: []uint8{0, 1, 2}}, "3 labels for a 2x2 image"},
		{Prediction{Image: "a.jpg", Width: 1, Height: 1, Labels: []uint8{4}}, "class 4 has no name"},
		{Prediction{Image: "../a.jpg", Width: 1, Height: 1, Labels: []uint8{0}}, "not a relative"},
	} {
		if err := NewCOCOWriter(filepath.Join(t.TempDir(), "a.json"), opt).Add(c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.p, err, c.want)
		}
	}
}

// A run of more than 2^16 values takes several chunks.
func TestBrushRLELongRuns(t *testing.T) {
	w, h := 200, 200
	labels := make([]uint8, w*h)
	labels[w*h/2] = 1 // 80,000 values of 0 before it
	labels[w*h-1] = 1
	got, err := decodeBrushRLE(toBytes(encodeBrushRLE(labels, 1)), w, h)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, labels) {
		t.Error("long runs do not read back")
	}
}

func toBytes(v []int) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
