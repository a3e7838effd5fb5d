package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// personPreprocess is how the shared DeepLabV3+ person model sees CamVid:
// images upscaled 2x to 721x961, values mapped to [-1, 1].
var personPreprocess = []string{"--scale", "2", "--multiple-of", "8", "--plus-one",
	"--value-scale", "0.00784313725490196", "--value-offset", "-1"}

// Acceptance: the pretrained person model, named by the registry and run
// without a preprocessing flag, scores the documented person IoU (0.53) on
// CamVid val (Pedestrian + Bicyclist = person, Unlabelled ignored): the
// registry's preprocessing (2x upscale, x/127.5 − 1) is applied on its own.
func TestEvalPersonModelOnCamVid(t *testing.T) {
	if testing.Short() {
		t.Skip("101 images at 721x961: skipped in -short mode")
	}
	runtimetest.Require(t)
	model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := testassets.Require(t, "data", "camvid")
	t.Setenv(resolve.SharedAssetsEnv, filepath.Dir(filepath.Dir(model)))
	stdout, err := runCLI(t, "eval", "--model", "deeplabv3plus-person-dynamic",
		"--images", filepath.Join(camvid, "images", "val"), "--masks", filepath.Join(camvid, "masks", "val"),
		"--label-map", "9,10:1;11:255;*:0", "--batch", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sum evaluate.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	if sum.Images != 101 || sum.Failed != 0 {
		t.Fatalf("%d images, %d failed", sum.Images, sum.Failed)
	}
	person := sum.Classes[1].IoU
	if sum.Classes[1].Name != "person" || person == nil || *person < 0.52 {
		t.Fatalf("class 1 %q IoU = %v, want person >= 0.52 (documented: 0.53)", sum.Classes[1].Name, person)
	}
	t.Logf("CamVid val person IoU %.4f, mean IoU %.4f, %.0fs", *person, *sum.MeanIoU, sum.Seconds)
}

// The fixed 513x513 model works too: segtune stretches images to its input.
func TestSegmentFixedSizeModel(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Require(t, "models", "deeplabv3plus_person_513.onnx")
	camvid := testassets.Require(t, "data", "camvid")
	in := t.TempDir()
	for _, name := range []string{"0001TP_008550.png", "Seq05VD_f00000.png"} {
		src := filepath.Join(camvid, "images", "val", name)
		if _, err := os.Stat(src); err != nil {
			entries, _ := os.ReadDir(filepath.Join(camvid, "images", "val"))
			src = filepath.Join(camvid, "images", "val", entries[len(in)%len(entries)].Name())
		}
		if err := os.Symlink(src, filepath.Join(in, filepath.Base(src))); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	stdout, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", out, "--batch", "4",
		"--value-scale", "0.00784313725490196", "--value-offset", "-1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sum folder.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Succeeded == 0 || sum.Batch != 1 {
		t.Errorf("summary %+v: want the batch clamped to the model's fixed 1", sum)
	}
}
