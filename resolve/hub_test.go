package resolve

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/hub"
)

const testCommit = "89abcdef0123456789abcdef0123456789abcdef"

// serveRepo serves files as the Hub's resolve URLs do (X-Repo-Commit, an
// ETag that is no checksum) at HF_ENDPOINT, with the cache isolated.
func serveRepo(t *testing.T, files map[string][]byte) {
	t.Helper()
	isolateModelSearch(t, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/acme/seg/resolve/")
		_, name, _ = strings.Cut(name, "/")
		b, found := files[name]
		if !ok || !found {
			w.Header().Set("X-Error-Code", "EntryNotFound")
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("X-Repo-Commit", testCommit)
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	}))
	t.Cleanup(srv.Close)
	t.Setenv(hub.EndpointEnv, srv.URL)
	t.Setenv(hub.OfflineEnv, "")
	t.Setenv(hub.TokenEnv, "")
}

// A Hub model resolves to its cached file, and its repository's
// preprocessing and class names become a settings layer that the
// sidecar and the caller's flags override.
func TestHubModelSettings(t *testing.T) {
	serveRepo(t, map[string][]byte{
		"model.onnx":               models.SynthModel,
		"preprocessor_config.json": []byte(`{"do_rescale":true,"rescale_factor":0.00392156862745098,"image_mean":[0.5,0.4,0.3],"image_std":[0.2,0.2,0.2],"size":{"height":64,"width":96},"do_flip_channel_order":true}`),
		"config.json":              []byte(`{"id2label":{"1":"person","0":"background","2":"sky"}}`),
	})
	path, err := Model(context.Background(), "hf:acme/seg/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(path, HubCacheDir()) {
		t.Fatalf("model at %s, not in %s", path, HubCacheDir())
	}
	s, err := ModelSettings(path, "", imageio.Sidecar{})
	if err != nil {
		t.Fatal(err)
	}
	p := s.Preprocess
	if !reflect.DeepEqual(s.Classes, []string{"background", "person", "sky"}) || p.Height != 64 || p.Width != 96 ||
		!reflect.DeepEqual(p.Mean, []float64{0.5, 0.4, 0.3}) || p.MeanStdRange != "0..1" || p.ChannelOrder != imageio.BGR {
		t.Fatalf("settings %+v, preprocess %+v; want the repository's", s.Sidecar, *p)
	}
	if o := Origins(s.Layers); !strings.HasPrefix(o["classes"], "hf:acme/seg@"+testCommit) {
		t.Fatalf("classes from %q; want the Hub layer", o["classes"])
	}
	side := imageio.Sidecar{Version: 1, Classes: []string{"a", "b", "c"}}
	if err := side.Save(imageio.SidecarPath(path)); err != nil {
		t.Fatal(err)
	}
	s, err = ModelSettings(path, "", imageio.Sidecar{Preprocess: &imageio.Preprocess{Mean: []float64{0, 0, 0}}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Classes, side.Classes) || !reflect.DeepEqual(s.Preprocess.Mean, []float64{0, 0, 0}) || s.Preprocess.Width != 96 {
		t.Fatalf("with a sidecar and a flag: %+v %+v; want the sidecar's classes, the flag's mean, the Hub's size", s.Sidecar, *s.Preprocess)
	}
}

// Missing or malformed repository files are notes on the layer, not
// errors.
func TestHubModelBadConfigsAreNotes(t *testing.T) {
	serveRepo(t, map[string][]byte{"model.onnx": models.SynthModel, "config.json": []byte(`{"id2label": [`)})
	path, err := Model(context.Background(), "hf:acme/seg/model.onnx")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ModelSettings(path, "", imageio.Sidecar{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, l := range s.Layers {
		notes = append(notes, l.Notes...)
	}
	joined := strings.Join(notes, "\n")
	if !strings.Contains(joined, "no preprocessor_config.json") || !strings.Contains(joined, "config.json is not valid JSON") {
		t.Fatalf("notes %q; want one on each file", notes)
	}
}

// HF_HUB_OFFLINE with nothing cached is a *FetchError naming the model.
func TestHubModelOffline(t *testing.T) {
	serveRepo(t, map[string][]byte{"model.onnx": models.SynthModel})
	t.Setenv(hub.OfflineEnv, "1")
	_, err := Model(context.Background(), "hf:acme/seg/model.onnx")
	var fe *FetchError
	var oe *hub.OfflineError
	if !errors.As(err, &fe) || !errors.As(err, &oe) || !strings.Contains(err.Error(), "hf:acme/seg/model.onnx") {
		t.Fatalf("offline: %v; want a *FetchError wrapping an *OfflineError", err)
	}
	// Named by the setting model, as --model calls it, with usage's status.
	if named := setting.Rename(err, func(k string) string { return "--" + k }).Error(); named != "--model "+fe.Error() || fe.ExitCode() != 2 {
		t.Errorf("offline, named: %q (status %d); want --model and the fetch's error, status 2", named, fe.ExitCode())
	}
}

// TerminalUI's notices are segtune lines on its notes, and its byte bars
// come only when asked for.
func TestTerminalUI(t *testing.T) {
	var notes strings.Builder
	ui := TerminalUI(&notes, false)
	ui.Note("waiting for another download")
	if notes.String() != "segtune: waiting for another download\n" || ui.NewBar != nil {
		t.Errorf("notes %q, bar %v", notes.String(), ui.NewBar != nil)
	}
	if TerminalUI(&notes, true).NewBar == nil {
		t.Error("no byte bar when asked for")
	}
}

func TestHubSettingsConversions(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		want       imageio.Preprocess
		note       string
	}{
		{"defaults", `{"image_mean":[0.485,0.456,0.406],"image_std":[0.229,0.224,0.225],"size":512}`,
			imageio.Preprocess{Height: 512, Width: 512, Resize: imageio.ResizeStretch, Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}, MeanStdRange: "0..1"}, ""},
		{"no rescale", `{"do_rescale":false,"image_mean":127.5,"image_std":[127.5]}`,
			imageio.Preprocess{Mean: []float64{127.5, 127.5, 127.5}, Std: []float64{127.5, 127.5, 127.5}, MeanStdRange: "0..255"}, ""},
		{"other factor", `{"rescale_factor":0.5,"image_mean":[1,1,1],"image_std":[2,2,2]}`,
			imageio.Preprocess{Mean: []float64{2, 2, 2}, Std: []float64{4, 4, 4}, MeanStdRange: "0..255"}, ""},
		{"rescale only", `{"do_normalize":false,"size":{"shortest_edge":300}}`,
			imageio.Preprocess{ValueScale: 1.0 / 255}, "shortest_edge"},
		{"bad mean", `{"image_mean":[1,2],"image_std":[1,1,1]}`, imageio.Preprocess{}, "image_mean"},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "preprocessor_config.json"), []byte(tc.json), 0o644)
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"id2label":{"0":"a","2":"c"}}`), 0o644)
		s, notes := HubSettings(dir)
		var got imageio.Preprocess
		if s.Preprocess != nil {
			got = *s.Preprocess
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: preprocess %+v; want %+v", tc.name, got, tc.want)
		}
		joined := strings.Join(notes, "\n")
		if tc.note != "" && !strings.Contains(joined, tc.note) {
			t.Errorf("%s: notes %q; want one on %s", tc.name, notes, tc.note)
		}
		if s.Classes != nil || !strings.Contains(joined, "misses class 1") {
			t.Errorf("%s: classes %v, notes %q; want none and a note on the gap", tc.name, s.Classes, notes)
		}
	}
}
