package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func TestSegmentAnnotationsReadBackAsTheMasks(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 20, 12)
	writeImage(t, filepath.Join(in, "b.png"), 9, 7)
	os.WriteFile(filepath.Join(in, "broken.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644)
	out := filepath.Join(dir, "out")
	args := []string{"segment", "--model", model, "--input", in, "--output", out,
		"--annotations", "coco,labelstudio,cvat,cvat-xml,labelme", "--class-names", "background,red"}
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "1 of 3 images failed") {
		t.Fatalf("err = %v, want the broken image's failure", err)
	}
	masks := map[string][]uint8{}
	for _, name := range []string{"a", "b"} {
		m, err := imageio.ReadMask(filepath.Join(out, name+".png"), imageio.MaskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		masks[name] = make([]uint8, len(m.Labels))
		for i, v := range m.Labels {
			masks[name][i] = uint8(v)
		}
	}
	same := func(format string, set *annot.Set, name func(annot.Sample) string) {
		t.Helper()
		if len(set.Samples) != len(masks) {
			t.Fatalf("%s: %d images, want %d (the broken one left out)", format, len(set.Samples), len(masks))
		}
		for _, s := range set.Samples {
			m, err := s.Mask()
			if err != nil {
				t.Fatal(err)
			}
			if want, ok := masks[name(s)]; !ok || !slices.Equal(m, want) || !slices.Contains(m, 1) {
				t.Errorf("%s: %s reads back other than its mask", format, s.Ref)
			}
		}
	}
	stem := func(s annot.Sample) string { return strings.TrimSuffix(filepath.Base(s.Ref), filepath.Ext(s.Ref)) }
	set, err := annot.ReadCOCO(filepath.Join(out, "coco", "annotations.json"), annot.COCOOptions{ImageDir: in})
	if err != nil {
		t.Fatal(err)
	}
	same("coco", set, stem)
	if set, err = annot.ReadCVAT(filepath.Join(out, "cvat"), annot.CVATOptions{}); err != nil {
		t.Fatal(err)
	}
	same("cvat", set, stem)
	if set, err = annot.ReadCVATXML(filepath.Join(out, "cvat-xml", "annotations.xml"), annot.CVATXMLOptions{ImageDir: in}); err != nil {
		t.Fatal(err)
	}
	same("cvat-xml", set, stem)
	lm := []string{filepath.Join(out, "labelme", "a.json"), filepath.Join(out, "labelme", "b.json")}
	if set, err = annot.ReadLabelMe(lm, annot.LabelMeOptions{Root: dir}); err != nil {
		t.Fatal(err)
	}
	same("labelme", set, stem)
	if set.Samples[0].Image != filepath.Join(in, "a.png") {
		t.Errorf("LabelMe's imagePath leads to %s, not the image", set.Samples[0].Image)
	}
	data, err := os.ReadFile(filepath.Join(out, "labelstudio", "tasks.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tasks []struct {
		Data        map[string]string
		Predictions []struct {
			Result []struct {
				Value struct{ BrushLabels []string }
			}
		}
	}
	if err := json.Unmarshal(data, &tasks); err != nil || len(tasks) != 2 {
		t.Fatalf("labelstudio tasks %s: %v", data, err)
	}
	if r := tasks[0].Predictions[0].Result; tasks[0].Data["image"] != "/data/local-files/?d=a.png" || len(r) != 1 || !slices.Equal(r[0].Value.BrushLabels, []string{"red"}) {
		t.Errorf("labelstudio task %+v, want a.png with one red brush", tasks[0])
	}

	// Another run would replace them: refused before any work.
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), filepath.Join("coco", "annotations.json")+" is there already") {
		t.Errorf("second run: err = %v, want the existing annotations named", err)
	}
}

func TestSegmentAnnotationsRefusals(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 8, 8)
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--annotations", "coco,yolo", "--class-names", "bg,red"}, `--annotations: "yolo" is not one of coco, cvat, cvat-xml, labelme, labelstudio`},
		{[]string{"--annotations", "coco"}, "give --class-names"},
		{[]string{"--annotations", "coco", "--class-names", "bg,red", "--shard", "1/2"}, "--annotations with --shard"},
		{[]string{"--annotations", "coco", "--class-names", "bg,red,green"}, "3 class names (bg,red,green) for a model of 2 classes"},
	} {
		_, err := runCLI(t, append([]string{"segment", "--model", model, "--input", in, "--output", out}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.args, err, c.want)
		}
		if _, err := os.Stat(filepath.Join(out, "a.png")); err == nil {
			t.Errorf("%q: a mask was written before the refusal", c.args)
		}
	}
}
