package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/runtime/runtimetest"
)

// entries lists the names in dir (nil when it does not exist).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// Defect: --output file://INPUT passed the overlap guard (the raw URL was
// compared as a relative path) and the masks replaced the input images;
// --input file:///PATH, documented, failed to open. Now file:// URLs are
// paths before any check, the guard refuses input inside output too, and
// nothing is written when it refuses.
func TestSegmentFileURLsAndOverlap(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 20, 10)
	img := filepath.Join(in, "a.png")
	before, _ := os.ReadFile(img)
	link := filepath.Join(dir, "link")
	os.Symlink(in, link)
	refused := [][]string{
		{"--input", in, "--output", "file://" + in},
		{"--input", "file://" + in, "--output", "file://" + link},
		{"--input", "file://" + in, "--output", "file://" + in + "/masks"},
		{"--input", in, "--output", dir}, // the input inside the output
		{"--input", "file://localhost" + in, "--output", "file://" + filepath.Join(dir, "o") + "/.."},
	}
	for _, args := range refused {
		_, err := runCLI(t, append([]string{"segment", "--model", model}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "overlap") {
			t.Errorf("%v: err = %v, want the overlap refused", args, err)
		}
	}
	if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
		t.Fatal("the input image was overwritten")
	}
	if got := entries(t, in); len(got) != 1 {
		t.Errorf("the input folder now holds %v", got)
	}
	if got := entries(t, dir); len(got) != 3 { // red.onnx, in, link
		t.Errorf("written beside the input: %v", got)
	}
	out := filepath.Join(dir, "out")
	if _, err := runCLI(t, "segment", "--model", "file://"+model, "--input", "file://"+in, "--output", "file://"+out); err != nil {
		t.Fatalf("segment with file:// URLs: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "a.png")); err != nil {
		t.Errorf("no mask: %v", err)
	}
	if _, err := runCLI(t, "segment", "--model", model, "--input", "file://elsewhere"+in, "--output", out); err == nil || !strings.Contains(err.Error(), "--input file://elsewhere") {
		t.Errorf("a file URL with a host: err = %v, want a refusal naming --input", err)
	}
}

// Defect: --output file:out2 (a file URL without its //) made a folder
// literally named "file:out2". A known scheme without // is refused,
// naming the flag, before anything is created; file:/ABS is a path.
func TestSchemeWithoutSlashesRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, tc := range []struct {
		args []string
		want string // the flag and its value, as the error must name them
	}{
		{[]string{"segment", "--model", "m.onnx", "--input", "in", "--output", "file:out2"}, "--output file:out2"},
		{[]string{"segment", "--model", "m.onnx", "--input", "s3:bucket/in", "--output", "out"}, "--input s3:bucket/in"},
		{[]string{"export", "--model", "m.onnx", "--out", "FILE:x.onnx"}, "--out FILE:x.onnx"},
	} {
		if _, err := runCLI(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want a refusal naming %q", tc.args, err, tc.want)
		}
	}
	if got := entries(t, dir); len(got) != 0 {
		t.Errorf("created %v", got)
	}
}

// Defect: finetune --out BASE_MODEL_FOLDER wrote over its own base model,
// and any --out folder's model.onnx, config.json and metrics.jsonl were
// replaced silently. Now the base model's folder (named as a path or a
// file:// URL) and a folder that is not a run are refused before anything
// is written, and a run's own folder still takes a resumed run.
func TestFinetuneOutIsARunFolder(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "synth")
	if _, err := runCLI(t, "data", "synth", "--out", data, "--train", "4", "--val", "2", "--size", "32x32"); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "base")
	os.Mkdir(base, 0o755)
	model := redModel(t, base)
	side := filepath.Join(base, "red.segtune.json")
	os.WriteFile(side, []byte(`{"version":1}`), 0o644)
	mine := filepath.Join(dir, "mine")
	os.Mkdir(mine, 0o755)
	for _, name := range []string{"model.onnx", "config.json", "metrics.jsonl"} {
		os.WriteFile(filepath.Join(mine, name), []byte("the user's "+name), 0o644)
	}
	snapshot := func(d string) map[string]string {
		m := map[string]string{}
		for _, name := range entries(t, d) {
			b, _ := os.ReadFile(filepath.Join(d, name))
			m[name] = string(b)
		}
		return m
	}
	before := map[string]map[string]string{base: snapshot(base), mine: snapshot(mine), data: snapshot(data)}
	common := []string{"finetune", "--model", model, "--data", data, "--label-map", "1,2:1;*:0", "--crop", "32x32", "--batch", "2", "--steps", "1", "--threads", "1"}
	for _, tc := range []struct{ out, want string }{
		{base, "is the folder of the base model"},
		{"file://" + base, "is the folder of the base model"},
		{filepath.Join(data, "images", "train"), "is inside the data folder"},
		{data, "is inside the data folder"},
		{mine, "is not a segtune run folder"},
	} {
		_, err := runCLI(t, append(common, "--out", tc.out)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "choose") {
			t.Errorf("--out %s: err = %v, want %q", tc.out, err, tc.want)
		}
	}
	for d, files := range before {
		if got := snapshot(d); len(got) != len(files) {
			t.Errorf("%s now holds %v, had %v", d, entries(t, d), files)
		} else {
			for name, body := range files {
				if got[name] != body {
					t.Errorf("%s changed", filepath.Join(d, name))
				}
			}
		}
	}
	run := filepath.Join(dir, "run")
	if _, err := runCLI(t, append(common, "--out", run)...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "finetune", "--out", run, "--resume", "--steps", "2", "--threads", "1"); err != nil {
		t.Errorf("resuming into the run's own folder: %v", err)
	}
}

// A file where segment or eval wants a folder (--output an existing file,
// --input one image, --masks a file) or an input folder that does not
// exist is refused naming the flag, before the model is read (here it
// does not exist), and the file is left as it was.
func TestFolderFlagsThatAreNoFolders(t *testing.T) {
	dir := t.TempDir()
	in := imageFolder(t, dir, 20, 10)
	file := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(dir, "missing.onnx")
	missing := filepath.Join(dir, "nowhere")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"segment", "--model", model, "--input", in, "--output", file}, "--output " + file + ": " + file + " is not a folder"},
		{[]string{"segment", "--model", model, "--input", filepath.Join(in, "a.png"), "--output", filepath.Join(dir, "o")}, "--input " + filepath.Join(in, "a.png") + ": "},
		{[]string{"segment", "--model", model, "--input", missing, "--output", filepath.Join(dir, "o")}, "--input " + missing + ": "},
		{[]string{"eval", "--model", model, "--images", in, "--masks", file}, "--masks " + file + ": "},
		{[]string{"eval", "--model", model, "--images", missing, "--masks", in}, "--images " + missing + ": "},
	} {
		if _, err := runCLI(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want a refusal starting %q", tc.args, err, tc.want)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "mine" {
		t.Errorf("%s now holds %q", file, b)
	}
	if got := entries(t, dir); len(got) != 2 { // in, notes.txt
		t.Errorf("created beside them: %v", got)
	}
}

// A --model that is no ONNX file (here the script meant to export it) is
// named as such at once: no warning about its "embedded settings" first,
// no data listed, no run folder made.
func TestFinetuneRefusesANonONNXModelFirst(t *testing.T) {
	dir := t.TempDir()
	data := synthData(t, dir, 2, 1)
	script := filepath.Join(dir, "export.py")
	if err := os.WriteFile(script, []byte("import torch\ntorch.onnx.export(m, x, 'm.onnx')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	_, err := runCLI(t, "finetune", "--model", script, "--data", data, "--out", out, "--epochs", "1")
	if err == nil || !strings.Contains(err.Error(), script+": not a valid ONNX protobuf") {
		t.Errorf("err = %v, want the script named as no ONNX model", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was made for a run that could not start", out)
	}
}

// finetune --label-map with a spec that does not parse is refused naming
// the flag before the model or data are read and before --out is made (as
// data check and eval refuse it), not as "label map: label map …" once
// the run folder is locked.
func TestFinetuneRefusesABadLabelMapFirst(t *testing.T) {
	dir := t.TempDir()
	data := synthData(t, dir, 2, 1)
	out := filepath.Join(dir, "run")
	_, err := runCLI(t, "finetune", "--model", redModel(t, dir), "--data", data, "--out", out, "--label-map", "9,10;*:0")
	if err == nil || !strings.HasPrefix(err.Error(), "--label-map: ") {
		t.Errorf("err = %v, want a refusal naming --label-map", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s was made for a run that could not start", out)
	}
}

// --val-images without --val-masks (or a training folder without its
// pair) is refused before the run, naming both flags: it trained without
// any validation, saying only "no samples.png: no validation images".
func TestFinetuneFolderFlagsComeInPairs(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 2, 1)
	model := redModel(t, dir)
	out := filepath.Join(dir, "run")
	train := []string{"--train-images", filepath.Join(data, "images", "train"), "--train-masks", filepath.Join(data, "masks", "train")}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append(train, "--val-images", filepath.Join(data, "images", "val")), "--val-images and --val-masks go together"},
		{[]string{"--data", data, "--val-masks", filepath.Join(data, "masks", "val")}, "--val-images and --val-masks go together"},
		{[]string{"--data", data, "--train-images", filepath.Join(data, "images", "train")}, "--train-images and --train-masks go together"},
	} {
		args := append([]string{"finetune", "--model", model, "--out", out, "--steps", "1", "--batch", "1"}, tc.args...)
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%v: %s was made", tc.args, out)
		}
	}
}

// segment --output pointed at the annotation masks of its --input (the
// same names) stops before any work, keeping them and naming --overwrite;
// with --overwrite it replaces them.
func TestSegmentKeepsAnnotations(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 1, 2)
	images, masks := filepath.Join(data, "images", "val"), filepath.Join(data, "masks", "val")
	mask := filepath.Join(masks, "val_00000.png")
	gt, err := os.ReadFile(mask)
	if err != nil {
		t.Fatal(err)
	}
	model := redModel(t, dir)
	_, err = runCLI(t, "segment", "--model", model, "--input", images, "--output", masks, "--overlay")
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(err.Error(), mask) || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("err = %v; want exit status 2 naming %s and --overwrite", err, mask)
	}
	if b, _ := os.ReadFile(mask); !bytes.Equal(b, gt) {
		t.Fatal("the annotation was replaced")
	}
	if got := entries(t, masks); len(got) != 2 {
		t.Errorf("the masks folder now holds %v", got)
	}
	if _, err := runCLI(t, "segment", "--model", model, "--input", images, "--output", masks, "--overwrite"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(mask); bytes.Equal(b, gt) {
		t.Error("--overwrite kept the annotation")
	}
}
