package main

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// convModel writes a model of one 1x1 Conv with weights w ([out, 3])
// followed by the ops in after (each applied to the previous output), on
// inputs of any size; its output is "scores" with out channels.
func convModel(t *testing.T, path string, out int64, w []float32, after ...string) string {
	t.Helper()
	b := &onnx.Builder{}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{out, 3, 1, 1}, w))
	prev := "conv"
	b.Emit("Conv", "conv", []string{"input", wt}, []string{prev})
	for i, op := range after {
		next := op + string(rune('a'+i))
		b.Emit(op, next, []string{prev}, []string{next})
		prev = next
	}
	b.Emit("Identity", "out", []string{prev}, []string{"scores"})
	f32 := onnx.Float32
	m := onnx.NewModel(b.Graph("conv",
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("input", f32, "n", 3, "h", "w")},
		[]*onnx.ValueInfoProto{onnx.SymbolicValueInfo("scores", f32, "n", out, "h", "w")}), 17)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// sqrtRedModel is redModel's logits (g-r, r-g) through Sqrt: NaN wherever
// red and green differ, finite on grey images.
func sqrtRedModel(t *testing.T, dir string) string {
	return convModel(t, filepath.Join(dir, "sqrt.onnx"), 2, []float32{-1, 1, 0, 1, -1, 0}, "Sqrt")
}

// writeFlat writes a w×h PNG of one colour.
func writeFlat(t *testing.T, path string, w, h int, c color.RGBA) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// writeMask writes a w×h mask of one label.
func writeMask(t *testing.T, path string, w, h int, label uint8) {
	t.Helper()
	labels := make([]uint8, w*h)
	for i := range labels {
		labels[i] = label
	}
	if err := imageio.WriteMaskPNG(path, labels, w, h, nil); err != nil {
		t.Fatal(err)
	}
}

// Defect: a model whose scores are NaN segmented everything to class 0
// and evaluated with exit 0. Now the image is named with the count of
// NaN scores, and a model NaN on every image stops the run.
func TestNonFiniteScoresFailNamingTheImage(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := sqrtRedModel(t, dir)
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(imgs, 0o755)
	os.Mkdir(masks, 0o755)
	writeFlat(t, filepath.Join(imgs, "grey.png"), 8, 6, color.RGBA{90, 90, 90, 255})
	writeImage(t, filepath.Join(imgs, "colour.png"), 8, 6)
	writeMask(t, filepath.Join(masks, "grey.png"), 8, 6, 0)
	writeMask(t, filepath.Join(masks, "colour.png"), 8, 6, 1)

	stdout, err := runCLI(t, "segment", "--model", model, "--input", imgs, "--output", filepath.Join(dir, "out"), "--batch", "2", "--json")
	if err == nil || !strings.Contains(err.Error(), "1 of 2 images failed") {
		t.Fatalf("segment: err = %v", err)
	}
	var sum folder.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Succeeded != 1 || len(sum.Failures) != 1 || !strings.HasSuffix(sum.Failures[0].Path, "colour.png") ||
		!strings.Contains(sum.Failures[0].Error, "non-finite scores") { // counted on the host path ("48 NaN"), flagged by the graph's arg-max
		t.Errorf("segment summary %+v", sum)
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "colour.png")); err == nil {
		t.Error("a mask was written from NaN scores")
	}

	stdout, err = runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--json")
	if err == nil || !strings.Contains(err.Error(), "1 of 2 images failed") {
		t.Fatalf("eval: err = %v", err)
	}
	var ev evaluate.Summary
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Failures) != 1 || !strings.HasSuffix(ev.Failures[0].Path, "colour.png") || !strings.Contains(ev.Failures[0].Error, "non-finite") {
		t.Errorf("eval failures %+v", ev.Failures)
	}

	// NaN on every image: the run stops as the model's failure.
	os.Remove(filepath.Join(imgs, "grey.png"))
	os.Remove(filepath.Join(masks, "grey.png"))
	for _, name := range []string{"b.png", "c.png"} {
		writeImage(t, filepath.Join(imgs, name), 8, 6)
		writeMask(t, filepath.Join(masks, name), 8, 6, 1)
	}
	_, err = runCLI(t, "segment", "--model", model, "--input", imgs, "--output", filepath.Join(dir, "out2"))
	if err == nil || !strings.Contains(err.Error(), "failed on every image tried") || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("all-NaN segment: err = %v", err)
	}
	_, err = runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks)
	if err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("all-NaN eval: err = %v", err)
	}
	// export's check fails on the float model's scores.
	out := filepath.Join(dir, "exp.onnx")
	_, err = runCLI(t, "export", "--model", model, "--out", out, "--precision", "fp16", "--check-images", imgs)
	if err == nil || !strings.Contains(err.Error(), "NaN") || !strings.Contains(err.Error(), "nothing written") {
		t.Errorf("fp16 export: err = %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the export was written")
	}
	// So does int8's, calibrated on 8 distinct images.
	calib := filepath.Join(dir, "calib")
	os.Mkdir(calib, 0o755)
	for i := 0; i < 8; i++ {
		writeImage(t, filepath.Join(calib, fmt.Sprintf("%d.png", i)), 8+i, 6)
	}
	_, err = runCLI(t, "export", "--model", model, "--out", out, "--precision", "int8", "--calibrate", calib)
	if err == nil || !strings.Contains(err.Error(), "NaN") || !strings.Contains(err.Error(), "nothing written") {
		t.Errorf("int8 export: err = %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the int8 export was written")
	}
}

// Defect: a one-channel logits head (segmentation_models' classes=1
// without activation) segmented everything to background. It is read as
// binary, said so once, and segments, evaluates and prints as two classes.
func TestOneChannelLogitsHeadIsBinary(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	// logit = r − g: red is foreground.
	model := convModel(t, filepath.Join(dir, "binary.onnx"), 1, []float32{1, -1, 0})
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(imgs, 0o755)
	os.Mkdir(masks, 0o755)
	writeImage(t, filepath.Join(imgs, "a.png"), 20, 10)
	labels := make([]uint8, 20*10)
	for i := range labels {
		if i%20 < 10 {
			labels[i] = 1
		}
	}
	if err := imageio.WriteMaskPNG(filepath.Join(masks, "a.png"), labels, 20, 10, nil); err != nil {
		t.Fatal(err)
	}

	stdout, err := runCLI(t, "info", model)
	if err != nil || !strings.Contains(stdout, "classes 2: one logit channel read as binary") {
		t.Errorf("info: %v\n%s", err, stdout)
	}
	out := filepath.Join(dir, "out")
	stderr, err := runCLIStderr(t, "segment", "--model", model, "--input", imgs, "--output", out)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stderr, "read as binary"); n != 1 {
		t.Errorf("segment said %d times that the head is binary:\n%s", n, stderr)
	}
	mask, err := imageio.ReadMask(filepath.Join(out, "a.png"), imageio.MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, r := mask.Labels[2], mask.Labels[17]; l != 1 || r != 0 {
		t.Errorf("labels left/right %d/%d, want 1 (red foreground) / 0", l, r)
	}
	stdout, err = runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ev evaluate.Summary
	if err := json.Unmarshal([]byte(stdout), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.MeanIoU == nil || *ev.MeanIoU != 1 {
		t.Errorf("eval mean IoU %v, want 1", ev.MeanIoU)
	}
}

// A binary head fine-tunes (binary cross entropy on its logit) and its
// fine-tuned model is read as binary again.
func TestFinetuneOneChannelLogitsHead(t *testing.T) {
	runtimetest.Require(t)
	dir, _, data := exportSynth(t)
	model := convModel(t, filepath.Join(dir, "binary.onnx"), 1, []float32{1, -1, 0})
	run := filepath.Join(dir, "run")
	stderr, err := runCLIStderr(t, "finetune", "--model", model, "--data", data, "--out", run, "--label-map", "1,2:1;*:0",
		"--steps", "2", "--batch", "2", "--threads", "2", "--value-scale", "0.0039")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "read as binary") {
		t.Errorf("finetune did not say the head is binary:\n%s", stderr)
	}
	// Softmax cross entropy over one channel is 0 whatever the weights;
	// binary cross entropy of a near-zero logit is about log 2.
	metrics, err := os.ReadFile(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Kind string
		Loss float64
	}
	for _, line := range strings.Split(string(metrics), "\n") { // the first step's line (the base model's comes before)
		if err := json.Unmarshal([]byte(line), &first); err != nil || first.Kind == "step" {
			break
		}
	}
	if first.Kind != "step" || first.Loss < 0.1 {
		t.Errorf("first step's loss %v (%s): not binary cross entropy", first.Loss, first.Kind)
	}
	stdout, err := runCLI(t, "info", filepath.Join(run, "model.onnx"))
	if err != nil || !strings.Contains(stdout, "read as binary") {
		t.Errorf("info of the fine-tuned model: %v\n%s", err, stdout)
	}
}

// Defect: an int8 export calibrated on one black image passed its own
// check on that image, then disagreed with the float model on real ones.
// Calibration on too few distinct, non-blank images is refused naming the
// flag; the check runs on images held out from calibration where the
// folder has enough, and the report says which images it checked.
func TestExportCalibrationSanity(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	out := filepath.Join(dir, "q.onnx")
	export := func(calib string, extra ...string) (deploy.Report, error) {
		t.Helper()
		stdout, err := runCLI(t, append([]string{"export", "--model", model, "--out", out, "--precision", "int8",
			"--calibrate", calib, "--threads", "2", "--json"}, extra...)...)
		var rep deploy.Report
		if err == nil {
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("%v: %q", err, stdout)
			}
		}
		return rep, err
	}
	black := filepath.Join(dir, "black")
	os.Mkdir(black, 0o755)
	writeFlat(t, filepath.Join(black, "black.png"), 64, 48, color.RGBA{0, 0, 0, 255})
	copies := filepath.Join(dir, "copies")
	os.Mkdir(copies, 0o755)
	train, _ := imageio.ListImages(filepath.Join(data, "images", "train"))
	one, _ := os.ReadFile(train[0])
	for i := 0; i < 10; i++ {
		os.WriteFile(filepath.Join(copies, fmt.Sprintf("c%d.png", i)), one, 0o644)
	}
	for _, c := range []struct{ dir, want string }{
		{black, "near-constant (blank) images: 1 (black.png)"},
		{copies, "only 1 of the 8 calibration images are distinct"}, // 2 of 10 held out to check on
	} {
		_, err := export(c.dir)
		if err == nil || !strings.Contains(err.Error(), "--calibrate "+c.dir) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "--calibrate-min-images") {
			t.Errorf("--calibrate %s: err = %v, want a refusal naming the flag and %q", c.dir, err, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("--calibrate %s: a model was written", c.dir)
		}
	}
	// 16 varied images: 4 held out to check on, 12 calibrated on.
	many := filepath.Join(dir, "many")
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Train, cfg.Val = 3, 16, 1
	if _, err := synth.Generate(many, cfg); err != nil {
		t.Fatal(err)
	}
	rep, err := export(filepath.Join(many, "images", "train"))
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Check
	if !rep.Passed || rep.Calibration.Images != 12 || c == nil || c.Images != 4 || len(c.Paths) != 4 ||
		c.CalibrationImages == nil || *c.CalibrationImages != 0 || !strings.Contains(c.Source, "held out") {
		t.Errorf("report %+v, check %+v", rep, c)
	}
	text, _ := os.ReadFile(strings.TrimSuffix(out, ".onnx") + ".report.txt")
	if !strings.Contains(string(text), "held out: none was calibrated on") {
		t.Errorf("text report does not say the check images were held out:\n%s", text)
	}
	// 8 images, all needed to calibrate: checked on them, with a warning.
	rep, err = export(filepath.Join(data, "images", "train"))
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Check; c == nil || c.CalibrationImages == nil || *c.CalibrationImages != 8 ||
		!slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "8 of the 8 checked images were calibrated on") }) {
		t.Errorf("check on the calibration images: problems %q", rep.Problems)
	}
}

// Defect: an fp32 export without --check-images only loaded the model in
// ONNX Runtime, so a model whose scores are NaN was written and
// "PASSED". Now it segments a synthetic image and fails on non-finite
// scores, writing nothing; a sound model still exports.
func TestExportFP32ChecksFiniteScores(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	nan := float32(math.NaN())
	models := map[string]string{
		"all-NaN":    convModel(t, filepath.Join(dir, "nan.onnx"), 2, []float32{nan, nan, nan, nan, nan, nan}),
		"NaN-colour": sqrtRedModel(t, dir),
	}
	for name, model := range models {
		out := filepath.Join(dir, name+"-exp.onnx")
		_, err := runCLI(t, "export", "--model", model, "--out", out)
		if err == nil || !strings.Contains(err.Error(), "NaN") || !strings.Contains(err.Error(), "nothing written") ||
			!strings.Contains(err.Error(), "synthetic") {
			t.Errorf("%s fp32 export: err = %v", name, err)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: the export was written", name)
		}
	}
	sound := convModel(t, filepath.Join(dir, "sound.onnx"), 2, []float32{-1, 1, 0, 1, -1, 0})
	if _, err := runCLI(t, "export", "--model", sound, "--out", filepath.Join(dir, "sound-exp.onnx")); err != nil {
		t.Fatalf("sound model: %v", err)
	}
}
