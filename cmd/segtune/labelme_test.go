package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/data"
)

// A LabelMe folder is named before any work when a file is bad: a label
// labels.txt lacks, an image path out of the data folder; --format
// labelme names the layout, and data check's summary says where the
// class order came from.
func TestLabelMeDataCheck(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "a.png"), pngBytes(t, 6, 4))
	doc := func(label, imagePath string) []byte {
		return []byte(`{"version": "5.5.0", "flags": {}, "shapes": [{"label": "` + label + `", "points": [[1, 0], [3.5, 2.5]], "group_id": null, "shape_type": "rectangle", "flags": {}}],
		 "imagePath": "` + imagePath + `", "imageData": null, "imageHeight": 4, "imageWidth": 6}`)
	}
	writeFile(t, filepath.Join(root, "a.json"), doc("dog", "a.png"))
	out, err := runCLI(t, "data", "check", "--data", root, "--format", "labelme", "--json")
	var reports []data.Report
	if err != nil || json.Unmarshal([]byte(out), &reports) != nil || len(reports) != 1 {
		t.Fatalf("data check: %v\n%s", err, out)
	}
	if r := reports[0]; r.Pairs != 1 || len(r.Classes) != 2 || r.Classes[1].Pixels != 9 {
		t.Errorf("report %+v, want dog covering columns 1-3 of rows 0-2", r)
	}
	if stderr, _ := runCLIStderr(t, "data", "check", "--data", root); !strings.Contains(stderr, "labelme layout: 1 image/mask pairs; classes: _background_, then the labels found, sorted (no labels.txt)") {
		t.Errorf("summary: %s", stderr)
	}

	writeFile(t, filepath.Join(root, "labels.txt"), []byte("__ignore__\n_background_\ncat\n"))
	for _, args := range [][]string{
		{"data", "check", "--data", root},
		{"finetune", "--model", filepath.Join(root, "none.onnx"), "--data", root, "--out", filepath.Join(t.TempDir(), "run")},
	} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), filepath.Join(root, "a.json")+`: shape 0: label "dog" is not in `+filepath.Join(root, "labels.txt")) {
			t.Errorf("%s with a label labels.txt lacks: %v", args[0], err)
		}
	}
	writeFile(t, filepath.Join(root, "a.json"), doc("cat", "../../a.png"))
	if _, err := runCLI(t, "data", "check", "--data", root); err == nil || !strings.Contains(err.Error(), "points outside the data folder") {
		t.Errorf("image path out of the data folder: %v", err)
	}
}
