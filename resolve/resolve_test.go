package resolve

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segtune/segtune/models"
)

// isolateModelSearch points every folder Local searches at empty
// temporary ones and returns the cache folder. The upward search for
// shared/assets starts at wd ("" turns it off: a temporary folder's parents
// may well hold one).
func isolateModelSearch(t *testing.T, wd string) (cache string) {
	t.Helper()
	cache = t.TempDir()
	t.Setenv("SEGTUNE_CACHE_DIR", cache)
	t.Setenv(SharedAssetsEnv, t.TempDir())
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
		if got, err := Local(v); err != nil || got != v {
			t.Errorf("Local(%q) = %q, %v", v, got, err)
		}
	}

	// An embedded model is written to the cache once.
	p, err := Local(models.SynthName)
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
	_, err = Local("DeepLabV3Plus-Person-Dynamic")
	if err == nil {
		t.Fatal("resolved a model that is nowhere")
	}
	for _, want := range append(SearchDirs(), e.File) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}

	// Found in $SEGTUNE_SHARED_ASSETS/models.
	shared := os.Getenv(SharedAssetsEnv)
	if err := os.MkdirAll(filepath.Join(shared, "models"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(shared, "models", e.File)
	if err := os.WriteFile(want, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := Local(e.Name); err != nil || got != want {
		t.Errorf("Local(%s) = %q, %v; want %s", e.Name, got, err, want)
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
	if got, err := Local(e.Name); err != nil || got != want {
		t.Errorf("Local(%s) = %q, %v; want %s", e.Name, got, err, want)
	}
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
			got, err := Local(models.SynthName)
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
	if _, err := Local(models.SynthName); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "folder") {
		t.Errorf("a folder at the entry: err = %v", err)
	}
}

func TestWriteModelList(t *testing.T) {
	isolateModelSearch(t, "")
	var b strings.Builder
	if err := WriteModelList(&b); err != nil {
		t.Fatal(err)
	}
	registry, hubPart, _ := strings.Cut(b.String(), "\n\n")
	lines := strings.Split(strings.TrimSpace(registry), "\n")
	if !strings.HasPrefix(lines[0], "name") || !strings.Contains(lines[0], "where") {
		t.Fatalf("header %q", lines[0])
	}
	known := models.Known()
	if len(lines) != 1+len(known) {
		t.Fatalf("%d rows for %d known models:\n%s", len(lines)-1, len(known), b.String())
	}
	for i, e := range known {
		if !strings.HasPrefix(lines[1+i], e.Name+" ") {
			t.Errorf("row %d %q does not start with %s", i, lines[1+i], e.Name)
		}
	}
	for _, e := range models.Catalogue() {
		if !strings.Contains(hubPart, e.Name+"  "+e.Ref()+"  (not cached)") || !strings.Contains(hubPart, "recorded on first download") {
			t.Errorf("Hub section lacks %s (%s) and its checksum state:\n%s", e.Name, e.Ref(), hubPart)
		}
	}
}
