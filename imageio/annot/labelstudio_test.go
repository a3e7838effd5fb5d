package annot

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fixtures are written by testdata/gen_labelstudio_reference.mjs with
// @thi.ng/rle-pack, the encoder Label Studio's editor uses for brushes.
type lsExpected struct {
	Classes    []string `json:"classes"`
	Unlabelled []string `json:"unlabelled"`
	Masks      map[string]struct {
		Width  int      `json:"width"`
		Height int      `json:"height"`
		Rows   []string `json:"rows"`
	} `json:"masks"`
}

func readLSExpected(t *testing.T) lsExpected {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "labelstudio_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e lsExpected
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestReadLabelStudioMatchesReference(t *testing.T) {
	want := readLSExpected(t)
	set, err := ReadLabelStudio(filepath.Join("testdata", "labelstudio_export.json"), LabelStudioOptions{ImageDir: "media"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, want.Classes) {
		t.Errorf("classes %q, want %q", set.Classes, want.Classes)
	}
	if !slices.Equal(set.Unlabelled, want.Unlabelled) {
		t.Errorf("unlabelled %q, want %q", set.Unlabelled, want.Unlabelled)
	}
	if len(set.Samples) != len(want.Masks) {
		t.Fatalf("%d samples, want %d", len(set.Samples), len(want.Masks))
	}
	for _, s := range set.Samples {
		w, ok := want.Masks[s.Ref]
		if !ok {
			t.Fatalf("unexpected sample %q", s.Ref)
		}
		if s.Image != filepath.Join("media", filepath.Base(s.Ref)) {
			t.Errorf("image %q for %q", s.Image, s.Ref)
		}
		if s.Width != w.Width || s.Height != w.Height {
			t.Fatalf("%s: %dx%d, want %dx%d", s.Ref, s.Width, s.Height, w.Width, w.Height)
		}
		m, err := s.Mask()
		if err != nil {
			t.Fatal(err)
		}
		if got := maskRows(m, s.Width, s.Height); !slices.Equal(got, w.Rows) {
			t.Errorf("%s: mask\n%s\nwant\n%s", s.Ref, strings.Join(got, "\n"), strings.Join(w.Rows, "\n"))
		}
	}
}

func TestLabelStudioClassOptions(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "labelstudio_export.json"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := DecodeLabelStudio(data, "ls.json", LabelStudioOptions{Labels: []string{"Dog", "Cat", "Bird"}, NoBackground: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, []string{"Dog", "Cat", "Bird"}) {
		t.Fatalf("classes %q", set.Classes)
	}
	m, err := set.Samples[0].Mask() // 20×15: Cat disc at (8,7), Dog rectangle over x 10..17, y 4..11
	if err != nil {
		t.Fatal(err)
	}
	if m[0] != Ignore || m[7*20+5] != 1 || m[7*20+12] != 0 {
		t.Errorf("undrawn %d, cat %d, dog %d; want %d, 1, 0", m[0], m[7*20+5], m[7*20+12], Ignore)
	}
	_, err = DecodeLabelStudio(data, "ls.json", LabelStudioOptions{Labels: []string{"Dog"}})
	if err == nil || !strings.Contains(err.Error(), `brush label "Cat"`) {
		t.Errorf("a label missing from Labels: %v", err)
	}
}

// lsEdit decodes the fixture export, lets edit change it and encodes it
// again.
func lsEdit(t *testing.T, edit func(tasks []map[string]any, res map[string]any)) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "labelstudio_export.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []map[string]any
	if err := json.Unmarshal(data, &tasks); err != nil {
		t.Fatal(err)
	}
	ann := tasks[0]["annotations"].([]any)[0].(map[string]any)
	edit(tasks, ann["result"].([]any)[0].(map[string]any))
	out, err := json.Marshal(tasks)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDecodeLabelStudioRejectsHostileFiles(t *testing.T) {
	rle := func(res map[string]any) []any { return res["value"].(map[string]any)["rle"].([]any) }
	setRLE := func(res map[string]any, v []any) { res["value"].(map[string]any)["rle"] = v }
	cases := []struct {
		name string
		edit func([]map[string]any, map[string]any)
		want string
	}{
		{"truncated RLE", func(_ []map[string]any, r map[string]any) { setRLE(r, rle(r)[:len(rle(r))/2]) }, "ends before"},
		{"empty RLE", func(_ []map[string]any, r map[string]any) { setRLE(r, []any{}) }, "ends before"},
		{"value not a byte", func(_ []map[string]any, r map[string]any) { rle(r)[9] = 300.0 }, "rle[9] = 300"},
		{"count not 4wh", func(_ []map[string]any, r map[string]any) { r["original_width"] = 21.0 }, "holds 1200 values"},
		{"huge count", func(_ []map[string]any, r map[string]any) {
			setRLE(r, []any{255.0, 255.0, 255.0, 255.0, 56.0, 0.0})
		}, "holds 4294967295 values"},
		{"run past the end", func(_ []map[string]any, r map[string]any) {
			// 4 values (1×1 image), word size 8, run sizes 16: a run of 2^16.
			setRLE(r, []any{0.0, 0.0, 0.0, 4.0, 63.0, 255.0, 252.0, 255.0, 255.0})
			r["original_width"], r["original_height"] = 1.0, 1.0
		}, "goes past"},
		{"huge image", func(_ []map[string]any, r map[string]any) { r["original_width"] = 1e6; r["original_height"] = 1e6 }, "is not between"},
		{"two labels", func(_ []map[string]any, r map[string]any) {
			r["value"].(map[string]any)["brushlabels"] = []any{"Cat", "Dog"}
		}, "2 brush labels"},
		{"polygon", func(_ []map[string]any, r map[string]any) { r["type"] = "polygonlabels" }, `"polygonlabels"`},
		{"not rle", func(_ []map[string]any, r map[string]any) { r["value"].(map[string]any)["format"] = "png" }, `format "png"`},
		{"image escapes", func(ts []map[string]any, _ map[string]any) {
			ts[0]["data"] = map[string]any{"image": "/data/local-files/?d=.."}
		}, "not a path inside"},
		{"no image", func(ts []map[string]any, _ map[string]any) { ts[0]["data"] = map[string]any{"a": "x", "b": "y"} }, "no \"image\" key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeLabelStudio(lsEdit(t, c.edit), "bad.json", LabelStudioOptions{})
			var e *Error
			if !errors.As(err, &e) || e.File != "bad.json" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an *Error naming bad.json with %q", err, c.want)
			}
			if c.name != "no image" && c.name != "image escapes" && !strings.Contains(e.Item, "task 1") {
				t.Errorf("error %q does not name the task", err)
			}
		})
	}
	if _, err := DecodeLabelStudio([]byte(`{"id":1}`), "obj.json", LabelStudioOptions{}); err == nil || !strings.Contains(err.Error(), "list of tasks") {
		t.Errorf("an object: %v", err)
	}
}

func FuzzDecodeBrushRLE(f *testing.F) {
	// From @thi.ng/rle-pack's encode: RGBA 1,2,3,255 and a 2×2 opaque layer.
	f.Add([]byte{0, 0, 0, 4, 57, 27, 248, 96, 32, 64, 127, 224}, 1, 1)
	f.Add([]byte{0, 0, 0, 16, 57, 27, 252, 64, 0, 127, 196, 0, 7, 252, 64, 0, 127, 196, 1, 7, 248}, 2, 2)
	f.Add([]byte{0, 0, 0, 4, 63, 255, 252, 255, 255}, 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, w, h int) {
		if w <= 0 || h <= 0 || w*h > 1<<16 {
			return
		}
		m, err := decodeBrushRLE(data, w, h)
		if err == nil && len(m) != w*h {
			t.Fatalf("mask of %d pixels for %dx%d", len(m), w, h)
		}
	})
}

func TestDecodeBrushRLEEncoderOutput(t *testing.T) {
	for _, c := range []struct {
		rle  []byte
		w, h int
		want []uint8
	}{
		// @thi.ng/rle-pack's encode of RGBA 1,2,3,255: drawn.
		{[]byte{0, 0, 0, 4, 57, 27, 248, 96, 32, 64, 127, 224}, 1, 1, []uint8{1}},
		// of 2×2 pixels 0,0,0,255: all drawn.
		{[]byte{0, 0, 0, 16, 57, 27, 252, 64, 0, 127, 196, 0, 7, 252, 64, 0, 127, 196, 1, 7, 248}, 2, 2, []uint8{1, 1, 1, 1}},
	} {
		got, err := decodeBrushRLE(c.rle, c.w, c.h)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("decodeBrushRLE(%v) = %v, %v; want %v", c.rle, got, err, c.want)
		}
	}
}

// repeatBrushRLE writes what decodeBrushRLE reads: a layer drawn all over.
func TestRepeatBrushRLE(t *testing.T) {
	m, err := decodeBrushRLE(repeatBrushRLE(300, 200, 255), 300, 200)
	if err != nil || len(m) != 300*200 || slices.Contains(m, 0) {
		t.Fatalf("decoded %d pixels, err %v; want 60000 drawn", len(m), err)
	}
}

// Exports of Label Studio before 1.0 keep annotations as "completions":
// they are read where "annotations" is missing or null, in any key order,
// and the first annotation not cancelled is the one painted even where
// was_cancelled comes after its results.
func TestDecodeLabelStudioCompletionsAndKeyOrder(t *testing.T) {
	brush := func(label string) string {
		return `{"id":"r","type":"brushlabels","original_width":1,"original_height":1,"value":{"format":"rle","brushlabels":["` + label + `"],"rle":[0,0,0,4,57,27,248,96,32,64,127,224]}}`
	}
	for _, c := range []struct{ name, doc, want string }{
		{"completions", `[{"completions":[{"id":1,"result":[` + brush("a") + `]}],"data":{"image":"x.png"},"id":1}]`, "a"},
		{"null annotations", `[{"id":1,"annotations":null,"completions":[{"id":1,"result":[` + brush("b") + `]}],"data":{"image":"x.png"}}]`, "b"},
		{"cancelled after its results", `[{"id":1,"data":{"image":"x.png"},"annotations":[{"result":[` + brush("c") + `],"was_cancelled":true,"id":1},{"id":2,"result":[` + brush("d") + `]}]}]`, "d"},
	} {
		set, err := DecodeLabelStudio([]byte(c.doc), "ls.json", LabelStudioOptions{})
		if err != nil || len(set.Samples) != 1 || !slices.Equal(set.Classes, []string{"background", c.want}) {
			t.Errorf("%s: %+v, %v; want one sample of class %q", c.name, set, err, c.want)
			continue
		}
		if m, err := set.Samples[0].Mask(); err != nil || !slices.Equal(m, []uint8{1}) {
			t.Errorf("%s: mask %v, %v", c.name, m, err)
		}
	}
}
