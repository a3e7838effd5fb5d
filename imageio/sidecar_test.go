package imageio

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSidecarPath(t *testing.T) {
	for in, want := range map[string]string{
		"models/model.onnx":   "models/model.segtune.json",
		"m":                   "m.segtune.json",
		"a.b/deeplab.v3.onnx": "a.b/deeplab.v3.segtune.json",
	} {
		if got := SidecarPath(in); got != want {
			t.Errorf("SidecarPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSidecarSaveLoad(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "person.onnx")
	if s, found, err := LoadModelSidecar(model); err != nil || found || s == nil {
		t.Fatalf("missing sidecar: %v %v %v", s, found, err)
	}
	ignore := 255
	s := Sidecar{
		Preprocess:  &Preprocess{Height: 513, Width: 513, ValueScale: 1 / 127.5, ValueOffset: -1},
		Classes:     []string{"background", "person"},
		Palette:     Palette{{0, 0, 0, 255}, {192, 0, 0, 255}},
		LabelMap:    mustParseMap(t, "9,10:1;11:255;*:0"),
		IgnoreLabel: &ignore,
	}
	path := SidecarPath(model)
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"person.segtune.json"}) {
		t.Fatalf("directory holds %v", names)
	}
	raw, _ := os.ReadFile(path)
	for _, want := range []string{`"version": 1`, `"label_map": "9-10:1;11:255;*:0"`, `"#c00000"`, `"value_offset": -1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("sidecar lacks %s:\n%s", want, raw)
		}
	}
	got, found, err := LoadModelSidecar(model)
	if err != nil || !found {
		t.Fatalf("load: %v %v", found, err)
	}
	if got.Version != 1 || got.Preprocess.Height != 513 || got.Preprocess.ValueOffset != -1 ||
		!slices.Equal(got.Classes, s.Classes) || !slices.Equal(got.Palette, s.Palette) ||
		got.LabelMap.String() != s.LabelMap.String() || *got.IgnoreLabel != 255 {
		t.Fatalf("round trip: %+v", got)
	}
}

func TestSidecarLoadErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		`{"version":1,"preprocess":{"chanel_order":"BGR"}}`: "unknown field",
		`{"version":2}`: "newer",
		`{"version":1,"preprocess":{"layout":"CHW"}}`: "layout",
		`{"version":1,"label_map":"9:"}`:              "label map",
		`{"version":1,"palette":["#12345"]}`:          "#rrggbb",
		`{"version":1,"palette":[[1,2,300]]}`:         "outside 0..255",
		`{"version":1,"ignore_label":-3}`:             "ignore_label",
		`{"version":1} {}`:                            "after the JSON",
		`[1]`:                                         "cannot unmarshal",
	}
	for body, want := range cases {
		p := writeTemp(t, dir, "m.segtune.json", []byte(body))
		_, err := LoadSidecar(p)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: want error naming the file and containing %q, got %v", body, want, err)
		}
	}
	p := writeTemp(t, dir, "ok.segtune.json", []byte(`{"version":1,"palette":[[1,2,3],"#ffffff"]}`))
	s, err := LoadSidecar(p)
	if err != nil || len(s.Palette) != 2 || s.Palette[0].B != 3 || s.Palette[1].R != 255 {
		t.Fatalf("mixed palette forms: %+v %v", s, err)
	}
	if err := (&Sidecar{Preprocess: &Preprocess{Layout: "x"}}).Save(filepath.Join(dir, "bad.json")); err == nil {
		t.Error("Save accepted an invalid sidecar")
	}
}

func TestSidecarMerge(t *testing.T) {
	base := Sidecar{
		Version: 1,
		Preprocess: &Preprocess{Height: 513, Width: 513, Resize: ResizeStretch, Layout: NCHW,
			ValueScale: 1 / 127.5, ValueOffset: -1},
		Classes:  []string{"bg", "person"},
		LabelMap: mustParseMap(t, "9,10:1;*:0"),
	}
	over := Sidecar{
		Preprocess: &Preprocess{Resize: ResizeScale, ScaleFactor: 2, Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.5, 0.5, 0.5}},
		LabelMap:   mustParseMap(t, "9:1;*:0"),
	}
	m := base.Merge(over)
	p := m.Preprocess
	if p.Height != 513 || p.Resize != ResizeScale || p.ScaleFactor != 2 || p.Layout != NCHW {
		t.Errorf("field merge: %+v", p)
	}
	if p.ValueScale != 0 || p.ValueOffset != 0 || len(p.Mean) != 3 {
		t.Errorf("normalisation group not replaced whole: %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("merged preprocess invalid: %v", err)
	}
	if m.LabelMap.String() != "9:1;*:0" || !slices.Equal(m.Classes, base.Classes) {
		t.Errorf("merge: %+v", m)
	}
	if base.Preprocess.Resize != ResizeStretch {
		t.Error("Merge modified its receiver's Preprocess")
	}
	onlySize := base.Merge(Sidecar{Preprocess: &Preprocess{Height: 721, Width: 961}})
	if onlySize.Preprocess.Height != 721 || onlySize.Preprocess.ValueOffset != -1 {
		t.Errorf("size override: %+v", onlySize.Preprocess)
	}
	fromNothing := Sidecar{}.Merge(Sidecar{Preprocess: &Preprocess{Height: 1, Width: 1}})
	if fromNothing.Preprocess == nil || fromNothing.Preprocess.Height != 1 {
		t.Errorf("override onto empty: %+v", fromNothing)
	}
}
