package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/cmd/segtune/demo"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// runCLI runs segtune with args and returns what it printed on stdout.
func runCLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	err = cliflag.Run(newApp(), append([]string{"segtune", "--quiet"}, args...))
	w.Close()
	os.Stdout = old
	return <-done, err
}

// synthData writes `segtune data synth` of train and val 32×32 examples
// into dir/synth and returns that folder.
func synthData(t *testing.T, dir string, train, val int) string {
	t.Helper()
	data := filepath.Join(dir, "synth")
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", fmt.Sprint(train), "--val", fmt.Sprint(val), "--size", "32x32"); err != nil {
		t.Fatal(err)
	}
	return data
}

// redModel writes a model that labels a pixel 1 when its red channel exceeds
// its green one: a 1x1 Conv with logits (g-r, r-g) on any input size.
func redModel(t *testing.T, dir string) string {
	t.Helper()
	return redModelSized(t, filepath.Join(dir, "red.onnx"), "h", "w")
}

// redModelSized writes redModel at path with input height h and width w:
// numbers for a fixed size, names for a dynamic one.
func redModelSized(t *testing.T, path string, h, w any) string {
	t.Helper()
	b := &onnx.Builder{}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, []float32{-1, 1, 0, 1, -1, 0}))
	b.Emit("Conv", "conv", []string{"input", wt}, []string{"logits"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("red",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, h, w)},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("logits", f32, "n", 2, h, w)}), 17)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// imageFolder makes dir/in holding one w×h image, a.png (writeImage), and
// returns the folder.
func imageFolder(t *testing.T, dir string, w, h int) string {
	t.Helper()
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	writeImage(t, filepath.Join(in, "a.png"), w, h)
	return in
}

// writeImage writes a w×h PNG whose left half is red and right half green.
func writeImage(t *testing.T, path string, w, h int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			if x < w/2 {
				img.Set(x, y, color.RGBA{200, 10, 10, 255})
			} else {
				img.Set(x, y, color.RGBA{10, 200, 10, 255})
			}
		}
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSegmentWritesMasksAndReportsBadImages(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 40, 30)
	writeImage(t, filepath.Join(in, "b.png"), 40, 30)
	writeImage(t, filepath.Join(in, "c.png"), 22, 16) // another size: its own batch
	os.WriteFile(filepath.Join(in, "broken.png"), []byte("\x89PNG\r\n\x1a\nnot really"), 0o644)
	out := filepath.Join(dir, "out")

	stdout, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", out,
		"--batch", "2", "--overlay", "--json")
	if err == nil || !strings.Contains(err.Error(), "1 of 4 images failed") {
		t.Fatalf("err = %v, want a failure count", err)
	}
	var sum folder.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("summary %q: %v", stdout, err)
	}
	if sum.Succeeded != 3 || sum.Failed != 1 || !strings.HasSuffix(sum.Failures[0].Path, "broken.png") {
		t.Fatalf("summary = %+v", sum)
	}
	for _, name := range []string{"a", "b", "c"} {
		mask, err := imageio.ReadMask(filepath.Join(out, name+".png"), imageio.MaskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Left (red) half is class 1, right (green) half class 0.
		if l, r := mask.Labels[2], mask.Labels[mask.Width-3]; l != 1 || r != 0 {
			t.Errorf("%s: labels at left/right = %d/%d, want 1/0", name, l, r)
		}
		if _, err := os.Stat(filepath.Join(out, "overlays", name+".png")); err != nil {
			t.Errorf("overlay: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "broken.png")); err == nil {
		t.Error("a mask was written for the broken image")
	}
}

func TestEvalScoresSyntheticMasks(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(imgs, 0o755)
	os.Mkdir(masks, 0o755)
	writeImage(t, filepath.Join(imgs, "a.png"), 20, 10)
	// Mask: label 7 on the left half (remapped to 1), 3 on the right (to 0),
	// and one ignored column.
	labels := make([]uint8, 20*10)
	for y := 0; y < 10; y++ {
		for x := 0; x < 20; x++ {
			switch {
			case x == 0:
				labels[y*20+x] = 11
			case x < 10:
				labels[y*20+x] = 7
			default:
				labels[y*20+x] = 3
			}
		}
	}
	if err := imageio.WriteMaskPNG(filepath.Join(masks, "a.png"), labels, 20, 10, nil); err != nil {
		t.Fatal(err)
	}
	stdout, err := runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks,
		"--label-map", "7:1;11:255;*:0", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		MeanIoU float64 `json:"mean_iou"`
		Pixels  int64   `json:"pixels"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	if sum.MeanIoU != 1 || sum.Pixels != 190 {
		t.Errorf("mean IoU %v over %d pixels, want 1 over 190", sum.MeanIoU, sum.Pixels)
	}

	// A mask of the wrong size is reported by name.
	os.WriteFile(filepath.Join(masks, "a.png"), pngBytes(t, 5, 5), 0o644)
	_, err = runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks)
	if err == nil {
		t.Fatal("mask of the wrong size accepted")
	}
}

func pngBytes(t *testing.T, w, h int) []byte {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, w, h)))
	return buf.Bytes()
}

func TestInfoJSON(t *testing.T) {
	dir := t.TempDir()
	model := redModel(t, dir)
	stdout, err := runCLI(t, "info", model, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		onnx.Summary
		Family      string   `json:"family"`
		Unsupported []string `json:"unsupported_ops"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if s.Parameters != 6 || len(s.Inputs) != 1 || s.Inputs[0].Dims[1] != "3" {
		t.Errorf("summary = %+v", s)
	}
	if s.Family != "CNN" || s.Unsupported != nil {
		t.Errorf("family %q, unsupported operators %q; want CNN and none", s.Family, s.Unsupported)
	}
	if _, err := runCLI(t, "info", filepath.Join(dir, "missing.onnx")); err == nil {
		t.Error("missing model accepted")
	}
}

// The demo's pieces at a small scale: data, two fine-tunes, table, verdict,
// curves, segmentation and export.
func TestDemoSmall(t *testing.T) {
	runtimetest.Require(t)
	out := t.TempDir()
	stdout, err := runCLI(t, "demo", "--out", out, "--epochs", "1", "--train", "16", "--val", "8")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseline", fmt.Sprintf("F1 α=%g", demo.Alpha), "small", "large", "verdict: ", "over the 8 validation images"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"curves.png", "samples.png", "refined.onnx", "segmented/overlays"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	masks, _ := filepath.Glob(filepath.Join(out, "segmented", "*.png"))
	if len(masks) != 8 {
		t.Errorf("%d masks, want 8", len(masks))
	}
	if _, err := onnx.Load(filepath.Join(out, "refined.onnx")); err != nil {
		t.Error(err)
	}
}

// The regularizer's projection schedules from the command line: each runs,
// and the per-epoch projection count tells them apart (3 steps per epoch:
// Algorithm 1 projects once, "step" after each step, "graph" twice a step).
func TestFinetuneProjectionSchedules(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "synth")
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", "12", "--val", "4", "--size", "32x32"); err != nil {
		t.Fatal(err)
	}
	model := redModel(t, dir)
	for schedule, want := range map[string]float64{"epoch": 1, "step": 3, "graph": 6} {
		out := filepath.Join(dir, "run-"+schedule)
		if _, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", out, "--label-map", "1,2:1;*:0",
			"--crop", "32x32", "--batch", "4", "--epochs", "1", "--lr", "1e-3",
			"--alpha", "0.01", "--projection", schedule); err != nil {
			t.Fatalf("%s: %v", schedule, err)
		}
		recs, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var got float64 = -1
		for _, line := range strings.Split(strings.TrimSpace(string(recs)), "\n") {
			var r map[string]any
			if json.Unmarshal([]byte(line), &r) == nil {
				if p, ok := r["reg_projections"].(float64); ok {
					got = p
				}
			}
		}
		if got != want {
			t.Errorf("%s: %v projections in the epoch, want %v", schedule, got, want)
		}
	}
	if _, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", filepath.Join(dir, "bad"),
		"--label-map", "1,2:1;*:0", "--crop", "32x32", "--batch", "4", "--epochs", "1", "--alpha", "0.01", "--projection", "sometimes"); err == nil ||
		!strings.Contains(err.Error(), "graph") {
		t.Errorf("unknown schedule: error %v, want one naming the choices", err)
	}
}
