package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/hub"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// serveHubRepo serves the repository acme/pets (the embedded model as
// seg.onnx, a config.json, no preprocessor_config.json) as the Hub's
// resolve URLs do, at HF_ENDPOINT, with segtune's cache isolated.
func serveHubRepo(t *testing.T) {
	t.Helper()
	isolateModelSearch(t)
	const commit = "0123456789abcdef0123456789abcdef01234567"
	files := map[string][]byte{"seg.onnx": models.SynthModel, "config.json": []byte(`{"id2label":{"0":"bg","1":"cat","2":"dog"}}`)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b []byte
		for _, rev := range []string{"main", commit} {
			if name, ok := strings.CutPrefix(r.URL.Path, "/acme/pets/resolve/"+rev+"/"); ok && files[name] != nil {
				b = files[name]
			}
		}
		if b == nil {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", commit)
		w.Header().Set("ETag", `"e1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	t.Setenv(hub.EndpointEnv, srv.URL)
	t.Setenv(hub.OfflineEnv, "")
}

// info (like every --model) takes a Hub reference: the model is
// downloaded into the cache and read with its repository's class names;
// a repository file it lacks is a note.
func TestInfoModelFromHub(t *testing.T) {
	serveHubRepo(t)
	stdout, err := runCLI(t, "info", "hf:acme/pets/seg.onnx", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct{ Path string }
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || !strings.HasPrefix(s.Path, resolve.HubCacheDir()) || filepath.Base(s.Path) != "seg.onnx" {
		t.Fatalf("info: path %q, %v; want seg.onnx in %s", s.Path, err, resolve.HubCacheDir())
	}
	if !strings.Contains(stdout, `"dog"`) {
		t.Errorf("info does not show the repository's class names:\n%s", stdout)
	}
	text, err := runCLI(t, "info", "hf:acme/pets/seg.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "the repository has no preprocessor_config.json") || !strings.Contains(text, "(from hf:acme/pets@") {
		t.Errorf("info lacks the Hub layer or its note on the missing preprocessor_config.json:\n%s", text)
	}
	t.Setenv(hub.OfflineEnv, "1")
	if _, err := runCLI(t, "info", "hf:acme/pets/other.onnx"); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Errorf("offline, uncached: %v; want an error naming HF_HUB_OFFLINE", err)
	}
}

// segment --model hf:… runs the downloaded model and says on stderr where
// its settings come from and what its repository lacked.
func TestSegmentModelFromHub(t *testing.T) {
	runtimetest.Require(t)
	serveHubRepo(t)
	dir := t.TempDir()
	in, out := imageFolder(t, dir, 64, 48), filepath.Join(dir, "out")
	stderr, err := runCLIStderr(t, "segment", "--model", "hf:acme/pets/seg.onnx", "--input", in, "--output", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "a.png")); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "segtune: note: the repository has no preprocessor_config.json") {
		t.Errorf("stderr lacks the note on the missing preprocessor_config.json:\n%s", stderr)
	}
}
