package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
)

// isolateModelSearch points every folder resolveModelArg searches at empty
// temporary ones and returns the cache folder. The upward search for
// shared/assets starts at wd ("" turns it off: a temporary folder's parents
// may well hold one).
func isolateModelSearch(t *testing.T, wd string) (cache string) {
	t.Helper()
	cache = t.TempDir()
	t.Setenv("SEGTUNE_CACHE_DIR", cache)
	t.Setenv(sharedAssetsEnv, t.TempDir())
	old := getwd
	getwd = func() (string, error) {
		if wd == "" {
			return "", os.ErrNotExist
		}
		return wd, nil
	}
	t.Cleanup(func() { getwd = old })
	return cache
}

func TestResolveModelArg(t *testing.T) {
	cache := isolateModelSearch(t, "")

	// A path is left alone, existing or not; so is a value that is no name.
	for _, v := range []string{"some/where/model.onnx", "resnet"} {
		if got, err := resolveModelArg(v); err != nil || got != v {
			t.Errorf("resolveModelArg(%q) = %q, %v", v, got, err)
		}
	}

	// An embedded model is written to the cache once.
	p, err := resolveModelArg(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "models", "segtune-synth.onnx"); p != want {
		t.Errorf("segtune-synth resolved to %s, want %s", p, want)
	}
	if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, models.SynthModel) {
		t.Errorf("cached copy differs from the embedded model (%v)", err)
	}

	// A shared model not found: the error names the file and every folder searched.
	e, _ := models.Lookup("deeplabv3plus-person-dynamic")
	_, err = resolveModelArg("DeepLabV3Plus-Person-Dynamic")
	if err == nil {
		t.Fatal("resolved a model that is nowhere")
	}
	for _, want := range append(modelDirs(), e.File) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}

	// Found in $SEGTUNE_SHARED_ASSETS/models.
	shared := os.Getenv(sharedAssetsEnv)
	if err := os.MkdirAll(filepath.Join(shared, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(shared, "models", e.File)
	if err := os.WriteFile(want, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := resolveModelArg(e.Name); err != nil || got != want {
		t.Errorf("resolveModelArg(%s) = %q, %v; want %s", e.Name, got, err, want)
	}
}

// The project's layout: shared/assets beside the repository is found from
// any folder inside it.
func TestResolveModelArgSharedAssetsAbove(t *testing.T) {
	root := t.TempDir()
	wd := filepath.Join(root, "repo", "cmd", "segtune")
	e, _ := models.Lookup("deeplabv3plus-person-513")
	want := filepath.Join(root, "shared", "assets", "models", e.File)
	for _, d := range []string{wd, filepath.Dir(want)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(want, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	isolateModelSearch(t, wd)
	if got, err := resolveModelArg(e.Name); err != nil || got != want {
		t.Errorf("resolveModelArg(%s) = %q, %v; want %s", e.Name, got, err, want)
	}
}

// Every command's --model takes a registry name: segment with
// --model segtune-synth runs the embedded model.
func TestSegmentModelByName(t *testing.T) {
	testassets.RequireORT(t)
	isolateModelSearch(t, "")
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
	isolateModelSearch(t, "")
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
	testassets.RequireORT(t)
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
	testassets.RequireORT(t)
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

// Defect: a FIFO at the cached segtune-synth.onnx blocked every command
// forever, and a link to /dev/zero was read without end. The cache's entry
// is now read only as a regular file of the model's size, and anything
// else there is discarded and written again, a link itself rather than
// through it.
func TestPoisonedModelCacheIsRebuilt(t *testing.T) {
	cache := isolateModelSearch(t, "")
	e, _ := models.Lookup(models.SynthName)
	p := filepath.Join(cache, "models", e.File)
	os.MkdirAll(filepath.Dir(p), 0o755)
	victim := filepath.Join(t.TempDir(), "victim.onnx")
	os.WriteFile(victim, []byte("not segtune's"), 0o644)
	poison := map[string]func() error{
		"a FIFO":                 func() error { return syscall.Mkfifo(p, 0o644) },
		"a link to /dev/zero":    func() error { return os.Symlink("/dev/zero", p) },
		"a link to a FIFO":       func() error { fifo := p + ".fifo"; syscall.Mkfifo(fifo, 0o644); return os.Symlink(fifo, p) },
		"a link to another file": func() error { return os.Symlink(victim, p) },
		"a truncated copy":       func() error { return os.WriteFile(p, models.SynthModel[:100], 0o644) },
		"a corrupt copy": func() error {
			b := bytes.Clone(models.SynthModel)
			b[len(b)/2] ^= 1
			return os.WriteFile(p, b, 0o644)
		},
	}
	for what, plant := range poison {
		os.Remove(p)
		if err := plant(); err != nil {
			t.Skipf("%s: %v", what, err)
		}
		done := make(chan error, 1)
		go func() {
			got, err := resolveModelArg(models.SynthName)
			if err == nil && got != p {
				err = fmt.Errorf("resolved to %s, want %s", got, p)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: resolving the cached model hung", what)
		}
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: the entry is not a regular file now: %v %v", what, fi, err)
		} else if b, _ := os.ReadFile(p); !bytes.Equal(b, models.SynthModel) {
			t.Errorf("%s: the entry is not the model", what)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "not segtune's" {
		t.Errorf("written through the link: the file it pointed to holds %d bytes", len(b))
	}

	// A folder is not the cache's to remove: the error names the entry.
	os.Remove(p)
	os.MkdirAll(filepath.Join(p, "x"), 0o755)
	if _, err := resolveModelArg(models.SynthName); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "folder") {
		t.Errorf("a folder at the entry: err = %v", err)
	}
}
