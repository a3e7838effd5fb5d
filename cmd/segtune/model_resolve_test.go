package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// isolateModelSearch points segtune's cache and the shared assets at empty
// temporary folders, so that a test reads and writes no real cache.
func isolateModelSearch(t *testing.T) {
	t.Helper()
	t.Setenv("SEGTUNE_CACHE_DIR", t.TempDir())
	t.Setenv(resolve.SharedAssetsEnv, t.TempDir())
}

// Every command's --model takes a registry name: segment with
// --model segtune-synth runs the embedded model.
func TestSegmentModelByName(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	in, out := imageFolder(t, dir, 64, 48), filepath.Join(dir, "out")
	if _, err := runCLI(t, "segment", "--model", models.SynthName, "--input", in, "--output", out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "a.png")); err != nil {
		t.Fatal(err)
	}
}

// info takes a registry name as its argument, as --model does.
func TestInfoModelByName(t *testing.T) {
	isolateModelSearch(t)
	stdout, err := runCLI(t, "info", models.SynthName, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Path string }
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || filepath.Base(s.Path) != models.SynthName+".onnx" {
		t.Errorf("info %s: path %q, %v", models.SynthName, s.Path, err)
	}
}

// runCLIStderr runs segtune (without --quiet) and returns its stderr;
// stdout is discarded.
func runCLIStderr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	old, oldOut := os.Stderr, os.Stdout
	os.Stderr, os.Stdout = w, null
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	err = newApp().Run(append([]string{"segtune"}, args...))
	w.Close()
	os.Stderr, os.Stdout = old, oldOut
	return <-done, err
}

// An unknown model without a sidecar or preprocessing flags gets exactly
// one line naming the defaults; with a flag it gets none.
func TestUnknownModelNotice(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 40, 30)
	count := func(extra ...string) int {
		stderr, err := runCLIStderr(t, append([]string{"segment", "--model", model, "--input", in,
			"--output", filepath.Join(dir, "out"), "--json"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(stderr, "is not a known model and has no sidecar")
	}
	if n := count(); n != 1 {
		t.Errorf("no preprocessing given: %d notices, want 1", n)
	}
	if n := count("--value-scale", "1"); n != 0 {
		t.Errorf("--value-scale given: %d notices, want 0", n)
	}
}

// The person model, copied under another name, is recognised by its
// digest: eval without preprocessing flags scores exactly what it scores
// with the documented ones, and not what the plain defaults give.
func TestEvalRecognisesRenamedPersonModel(t *testing.T) {
	runtimetest.Require(t)
	src := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := testassets.Require(t, "data", "camvid")
	dir := t.TempDir()
	model := filepath.Join(dir, "mystery.onnx")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, b, 0o644); err != nil {
		t.Fatal(err)
	}
	images, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(images, 0o755)
	os.Mkdir(masks, 0o755)
	// Three val images with many people (Pedestrian, Bicyclist).
	for _, name := range []string{"0016E5_08131.png", "0016E5_08101.png", "0016E5_08121.png"} {
		for _, d := range [][2]string{{"images", images}, {"masks", masks}} {
			p := filepath.Join(camvid, d[0], "val", name)
			if _, err := os.Stat(p); err != nil {
				t.Skipf("CamVid val image %s: %v", name, err)
			}
			if err := os.Symlink(p, filepath.Join(d[1], name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	eval := func(modelPath string, extra ...string) (person float64, report string) {
		t.Helper()
		stdout, err := runCLI(t, append([]string{"eval", "--model", modelPath, "--images", images, "--masks", masks,
			"--label-map", models.CamVidPersonLabelMap, "--json"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Classes []struct {
				Name string   `json:"name"`
				IoU  *float64 `json:"iou"`
			} `json:"classes"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || len(r.Classes) != 2 || r.Classes[1].IoU == nil {
			t.Fatalf("eval output %q: %v", stdout, err)
		}
		if r.Classes[1].Name != "person" {
			t.Errorf("class 1 is %q, want the registry's name person", r.Classes[1].Name)
		}
		c, _ := json.Marshal(r.Classes)
		return *r.Classes[1].IoU, string(c)
	}
	gotIoU, got := eval(model)
	_, want := eval(src, personPreprocess...)
	if got != want {
		t.Errorf("recognised copy without flags: %s\nwith the documented flags: %s", got, want)
	}
	rawIoU, _ := eval(model, "--value-scale", "1") // the defaults of an unknown model
	if !(gotIoU > rawIoU+0.05) {
		t.Errorf("person IoU %.4f with the registry's preprocessing, %.4f on raw values: want a clear gain", gotIoU, rawIoU)
	}
	t.Logf("person IoU %.4f (raw values: %.4f)", gotIoU, rawIoU)
}
