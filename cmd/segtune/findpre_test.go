package main

import (
	"image"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate/preprocsearch/searchtest"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// info --find-preprocessing finds the BGR -1..1 a model was made for from
// its labelled images, says how many it used, writes the sidecar on
// request and refuses to replace it without --force, before any work.
func TestInfoFindsPreprocessing(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	pre := imageio.Preprocess{ChannelOrder: imageio.BGR, ValueScale: 1 / 127.5, ValueOffset: -1}
	probe := image.NewRGBA(image.Rect(0, 0, 1, 1))
	probe.Set(0, 0, color.RGBA{200, 200, 200, 255})
	x := make([]float32, 3)
	if _, err := pre.Tensor(probe, x); err != nil {
		t.Fatal(err)
	}
	model := searchtest.ThresholdModel(t, filepath.Join(dir, "m.onnx"), x[0])
	images, masks := searchtest.LabelledNoise(t, dir, pre, x[0], 12, 24, 16)
	args := []string{"info", "--find-preprocessing", "--images", images, "--masks", masks, "--sample", "8", "--threads", "1", "--write-sidecar", model}
	stdout, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(stdout, "\n")
	if len(lines) < 3 || !strings.Contains(lines[2], "BGR -1..1") || !strings.Contains(lines[2], "1.0000") {
		t.Errorf("the table does not rank BGR -1..1 first:\n%s", stdout)
	}
	for _, want := range []string{"scored on 8 of 12 labelled images", "best: BGR -1..1", "chosen: BGR -1..1"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	side, found, err := imageio.LoadModelSidecar(model)
	if err != nil || !found || side.Preprocess == nil || side.Preprocess.ChannelOrder != imageio.BGR || side.Preprocess.ValueOffset != -1 {
		t.Fatalf("sidecar %+v (found %v, %v): want BGR -1..1", side, found, err)
	}
	written, err := os.ReadFile(imageio.SidecarPath(model))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("a second --write-sidecar: %v; want a refusal naming --force", err)
	}
	if again, _ := os.ReadFile(imageio.SidecarPath(model)); string(again) != string(written) {
		t.Error("the refused run changed the sidecar")
	}
	if _, err := runCLI(t, "info", "--images", images, model); err == nil || !strings.Contains(err.Error(), "--find-preprocessing") {
		t.Errorf("--images without --find-preprocessing: %v", err)
	}
}
