package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/hub"
	"github.com/segtune/segtune/resolve"
)

// info (like every --model) takes a Hub reference: the model is
// downloaded into the cache and read with its repository's class names;
// a repository file it lacks is a note.
func TestInfoModelFromHub(t *testing.T) {
	isolateModelSearch(t)
	files := map[string][]byte{"seg.onnx": models.SynthModel, "config.json": []byte(`{"id2label":{"0":"bg","1":"cat","2":"dog"}}`)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/acme/pets/resolve/main/")]
		if !ok {
			b, ok = files[strings.TrimPrefix(r.URL.Path, "/acme/pets/resolve/0123456789abcdef0123456789abcdef01234567/")]
		}
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
		w.Header().Set("ETag", `"e1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	defer srv.Close()
	t.Setenv(hub.EndpointEnv, srv.URL)
	t.Setenv(hub.OfflineEnv, "")
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
