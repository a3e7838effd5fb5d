package resolve

import (
	"testing"

	"github.com/segtune/segtune/imageio"
)

// The preprocessing's source is the highest layer that has one, under the
// caller's overrides; a scaling model says how to train at the images'
// own scale, by the caller's name for the setting.
func TestPreprocessSource(t *testing.T) {
	p := &imageio.Preprocess{Resize: imageio.ResizeScale, ScaleFactor: 0.5}
	s := Settings{Sidecar: imageio.Sidecar{Preprocess: p}, Layers: []Layer{
		{From: "the registry", Settings: imageio.Sidecar{Preprocess: p}},
		{From: "metadata_props", Settings: imageio.Sidecar{Preprocess: p}}, {From: "model.segtune.json"}}}
	flag := func(key string) string { return "--" + key }
	for _, c := range []struct {
		given []string
		want  string
	}{
		{nil, "from metadata_props; --scale_factor 1 trains at the images' own scale"},
		{[]string{"--mean", "--std"}, "--mean, --std over metadata_props"},
	} {
		if got := s.PreprocessSource(c.given, flag); got != c.want {
			t.Errorf("given %v: %q, want %q", c.given, got, c.want)
		}
	}
	if got := (Settings{}).PreprocessSource(nil, flag); got != "segtune's defaults: the model brings no preprocessing" {
		t.Errorf("no layers: %q", got)
	}
}
