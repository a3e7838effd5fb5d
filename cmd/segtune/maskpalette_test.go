package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// colourData writes a canonical data set (images/{train,val},
// masks/{train,val}) of syntheticPairs whose masks are RGB PNGs: class 0
// green, 1 red, the ignore label 255 white. It returns the root, the
// palette as a 256×1 image (entry i the colour of label i) and as a CVAT
// labelmap.txt (white as a third class, "void"), and the training pairs.
func colourData(t *testing.T, dir string) (root, palImage, labelmap string, train []labelled) {
	t.Helper()
	colours := map[uint8]color.RGBA{0: {0, 128, 0, 255}, 1: {128, 0, 0, 255}, 255: {255, 255, 255, 255}}
	root = filepath.Join(dir, "data")
	for _, split := range []string{"train", "val"} {
		pairs := syntheticPairs(t, filepath.Join(root, "images", split), 3)
		for _, p := range pairs {
			m := image.NewRGBA(image.Rect(0, 0, p.w, p.h))
			for i, l := range p.labels {
				m.Set(i%p.w, i/p.w, colours[l])
			}
			var buf bytes.Buffer
			if err := png.Encode(&buf, m); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, "masks", split, p.name+".png"), buf.Bytes())
		}
		if split == "train" {
			train = pairs
		}
	}
	pal := image.NewRGBA(image.Rect(0, 0, 256, 1))
	for i := range 256 {
		c, ok := colours[uint8(i)]
		if !ok {
			c = color.RGBA{uint8(i), uint8(i), uint8(i), 255} // unused, distinct
		}
		pal.Set(i, 0, c)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, pal); err != nil {
		t.Fatal(err)
	}
	palImage = filepath.Join(dir, "palette.png")
	writeFile(t, palImage, buf.Bytes())
	labelmap = filepath.Join(dir, "labelmap.txt")
	writeFile(t, labelmap, []byte("# label:color_rgb:parts:actions\nbackground:0,128,0::\nperson:128,0,0::\nvoid:255,255,255::\n"))
	return root, palImage, labelmap, train
}

// dataCheckJSON runs `data check --json` and returns its training split.
func dataCheckJSON(t *testing.T, args ...string) data.Report {
	t.Helper()
	out, err := runCLI(t, append([]string{"data", "check", "--json", "--split", "train"}, args...)...)
	if err != nil {
		t.Fatalf("data check %v: %v", args, err)
	}
	var reports []data.Report
	if err := json.Unmarshal([]byte(out), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("data check output %q: %v", out, err)
	}
	return reports[0]
}

// Colour masks are read through --mask-palette, from a palette image or a
// CVAT labelmap, by data check, data convert, finetune and export's check;
// without it they are refused, naming the file.
func TestColourMasksWithMaskPalette(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	root, palImage, labelmap, train := colourData(t, dir)
	var want [2]int64 // pixels of classes 0 and 1 in the training masks
	for _, p := range train {
		for _, l := range p.labels {
			if l < 2 {
				want[l]++
			}
		}
	}

	if out, err := runCLI(t, "data", "check", "--data", root, "--split", "train"); err == nil || !strings.Contains(out, "colour masks need a palette") {
		t.Fatalf("colour masks without --mask-palette: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"--mask-palette", palImage},
		{"--mask-palette", labelmap, "--label-map", "2:255", "--classes", "2"},
	} {
		r := dataCheckJSON(t, append([]string{"--data", root}, args...)...)
		if r.Pairs != len(train) || len(r.Classes) != 2 || r.Classes[0].Pixels != want[0] || r.Classes[1].Pixels != want[1] {
			t.Errorf("%v: %d pairs, histogram %+v; want %d pairs, pixels %v", args, r.Pairs, r.Classes, len(train), want)
		}
	}
	// The labelmap names its classes; white becomes class 2.
	r := dataCheckJSON(t, "--data", root, "--mask-palette", labelmap)
	if len(r.Classes) != 3 || r.Classes[1].Name != "person" || r.Classes[2].Name != "void" {
		t.Errorf("labelmap classes: %+v", r.Classes)
	}
	if _, err := runCLI(t, "data", "check", "--data", root, "--mask-palette", filepath.Join(dir, "none.png")); err == nil || !strings.Contains(err.Error(), "--mask-palette") {
		t.Errorf("a missing palette: %v", err)
	}

	// convert writes the labels as single-channel masks.
	conv := filepath.Join(dir, "converted")
	if _, err := runCLI(t, "data", "convert", "--data", root, "--split", "train", "--mask-palette", palImage, "--out", conv); err != nil {
		t.Fatal(err)
	}
	if r := dataCheckJSON(t, "--data", conv); r.Classes[0].Pixels != want[0] || r.Classes[1].Pixels != want[1] {
		t.Errorf("converted masks: histogram %+v, want pixels %v", r.Classes, want)
	}

	model := redModel(t, dir)
	run := filepath.Join(dir, "run")
	ft := []string{"finetune", "--model", model, "--data", root, "--out", run, "--crop", "16x16", "--batch", "1", "--steps", "2",
		"--scale-min", "1", "--scale-max", "1"}
	if _, err := runCLI(t, ft...); err == nil || !strings.Contains(err.Error(), "colour masks need a palette") {
		t.Fatalf("finetune on colour masks without --mask-palette: %v", err)
	}
	os.RemoveAll(run)
	if _, err := runCLI(t, append(ft, "--mask-palette", palImage)...); err != nil {
		t.Fatal(err)
	}
	if cfg, err := os.ReadFile(filepath.Join(run, "config.json")); err != nil || !bytes.Contains(cfg, []byte(`"mask_palette"`)) {
		t.Errorf("config.json does not record the mask palette (%v)", err)
	}

	// eval scores colour masks as it scores the same labels in grey masks.
	grey := filepath.Join(dir, "grey")
	if _, err := runCLI(t, "data", "convert", "--data", root, "--split", "val", "--mask-palette", palImage, "--out", grey); err != nil {
		t.Fatal(err)
	}
	evalArgs := []string{"eval", "--model", filepath.Join(run, "model.onnx"), "--images", filepath.Join(root, "images", "val"), "--json"}
	if out, err := runCLI(t, append(evalArgs, "--masks", filepath.Join(root, "masks", "val"))...); err == nil || !strings.Contains(out, "colour masks need a palette") {
		t.Errorf("eval on colour masks without --mask-palette: %v\n%s", err, out)
	}
	colour, err := runCLI(t, append(evalArgs, "--masks", filepath.Join(root, "masks", "val"), "--mask-palette", palImage)...)
	if err != nil {
		t.Fatal(err)
	}
	fromGrey, err := runCLI(t, append(evalArgs, "--masks", filepath.Join(grey, "masks", "val"))...)
	if err != nil {
		t.Fatal(err)
	}
	var a, b struct {
		MeanIoU *float64 `json:"mean_iou"`
	}
	if json.Unmarshal([]byte(colour), &a) != nil || json.Unmarshal([]byte(fromGrey), &b) != nil || a.MeanIoU == nil || b.MeanIoU == nil || *a.MeanIoU != *b.MeanIoU {
		t.Errorf("eval of colour masks %s\nand of the same labels in grey masks %s differ", colour, fromGrey)
	}

	exp := []string{"export", "--model", filepath.Join(run, "model.onnx"), "--out", filepath.Join(dir, "exp.onnx"),
		"--check-images", filepath.Join(root, "images", "val"), "--check-masks", filepath.Join(root, "masks", "val")}
	if _, err := runCLI(t, exp...); err == nil || !strings.Contains(err.Error(), "colour masks need a palette") {
		t.Errorf("export's check on colour masks without --mask-palette: %v", err)
	}
	if _, err := runCLI(t, append(exp, "--mask-palette", palImage)...); err != nil {
		t.Errorf("export's check with --mask-palette: %v", err)
	}
	if _, err := runCLI(t, "export", "--model", model, "--out", filepath.Join(dir, "exp2.onnx"), "--mask-palette", palImage); err == nil ||
		!strings.Contains(err.Error(), "--mask-palette is for") {
		t.Errorf("--mask-palette without --check-masks: %v", err)
	}
}
