package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/data"
)

// --coco-crowd says what COCO's crowd regions become: ignored (the
// default) or their category's class; data check counts them accordingly.
func TestCOCOCrowdFlag(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "annotations", "instances_val.json"), []byte(`{
	 "images": [{"id": 1, "file_name": "a.png", "width": 4, "height": 3}],
	 "categories": [{"id": 7, "name": "cat"}],
	 "annotations": [{"id": 1, "image_id": 1, "category_id": 7, "iscrowd": 1, "segmentation": [[0, 0, 2, 0, 2, 3, 0, 3]]}]}`))
	writeFile(t, filepath.Join(root, "val", "a.png"), pngBytes(t, 4, 3))
	catPixels := func(args ...string) int64 {
		t.Helper()
		out, err := runCLI(t, append([]string{"data", "check", "--data", root, "--split", "val", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("data check %v: %v", args, err)
		}
		var reports []data.Report
		if err := json.Unmarshal([]byte(out), &reports); err != nil {
			var one data.Report
			if err := json.Unmarshal([]byte(out), &one); err != nil {
				t.Fatalf("data check --json: %v\n%s", err, out)
			}
			reports = []data.Report{one}
		}
		for _, c := range reports[0].Classes {
			if c.Class == 1 {
				return c.Pixels
			}
		}
		return 0
	}
	if n := catPixels(); n != 0 {
		t.Errorf("default: %d crowd pixels counted as cat, want 0 (ignored)", n)
	}
	if n := catPixels("--coco-crowd", "class"); n != 6 {
		t.Errorf("--coco-crowd class: %d cat pixels, want 6", n)
	}
	if _, err := runCLI(t, "data", "check", "--data", root, "--coco-crowd", "maybe"); err == nil || !strings.Contains(err.Error(), "--coco-crowd") {
		t.Errorf("--coco-crowd maybe: error %v, want one naming the flag", err)
	}
}
