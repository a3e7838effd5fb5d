package folder

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
)

// A refused request names its settings by key, before any work.
func TestPlanAnnotationsNamesItsSettings(t *testing.T) {
	dir := t.TempDir()
	in, err := storage.OpenFolder(context.Background(), filepath.Join(dir, "in"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := storage.OpenFolder(context.Background(), filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	named := func(err error) string {
		return setting.Rename(err, func(k string) string { return "<" + k + ">" }).Error()
	}
	classes := []string{"bg", "red"}
	for _, tc := range []struct {
		req  AnnotationRequest
		want string
	}{
		{AnnotationRequest{Formats: "yolo", Classes: classes}, `<annotations>: "yolo" is not one of coco, cvat, cvat-xml, labelme, labelstudio`},
		{AnnotationRequest{Formats: "coco", Classes: classes, Sharded: true}, "<annotations> with <shard>: each shard"},
		{AnnotationRequest{Formats: "coco", Classes: []string{"bg", ""}}, "<class_names> bg,: a class name is empty"},
		{AnnotationRequest{Formats: "coco"}, "<annotations> names each class: give <class_names>"},
	} {
		_, err := PlanAnnotations(tc.req, in, out)
		if err == nil || len(named(err)) < len(tc.want) || named(err)[:len(tc.want)] != tc.want {
			t.Errorf("%+v: %v, want %q…", tc.req, err, tc.want)
		}
	}
	exp, err := PlanAnnotations(AnnotationRequest{Formats: "coco", ModelClasses: classes}, in, out) // the model's names
	if err != nil || exp.Dir != filepath.Join(dir, "out") || !slices.Equal(exp.Classes, classes) {
		t.Fatalf("%v %+v", err, exp)
	}
	os.MkdirAll(filepath.Join(dir, "out", "coco"), 0o755)
	os.WriteFile(filepath.Join(dir, "out", "coco", "annotations.json"), nil, 0o644)
	if _, err := PlanAnnotations(AnnotationRequest{Formats: "coco", Classes: classes}, in, out); err == nil || !errors.As(err, new(setting.Namer)) {
		t.Errorf("an existing file without Overwrite: %v", err)
	}
	if _, err := PlanAnnotations(AnnotationRequest{Formats: "coco", Classes: classes, Overwrite: true}, in, out); err != nil {
		t.Errorf("with Overwrite: %v", err)
	}
	if err := CheckAnnotationClasses(exp, 3); err == nil || named(err) != "<annotations>: 2 class names (bg,red) for a model of 3 classes" {
		t.Errorf("class count: %v", err)
	}
}
