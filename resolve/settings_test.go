package resolve

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models"
)

// Precedence, field by field: the model's layers, then the settings file,
// then the caller's override.
func TestModelSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(model, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	side := imageio.Sidecar{Version: 1, Classes: []string{"side0", "side1"}, Preprocess: &imageio.Preprocess{ValueScale: 0.25, ChannelOrder: imageio.BGR}}
	if err := side.Save(imageio.SidecarPath(model)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pre.json")
	pre := imageio.Sidecar{Version: 1, Preprocess: &imageio.Preprocess{ValueScale: 0.5, ValueOffset: -1, Interpolation: imageio.Nearest}}
	if err := pre.Save(file); err != nil {
		t.Fatal(err)
	}
	s, err := ModelSettings(model, file, imageio.Sidecar{Preprocess: &imageio.Preprocess{Interpolation: imageio.Bilinear}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Checkpoint || len(s.Layers) != 2 || s.Layers[0].Known == nil || s.Layers[1].From != imageio.SidecarPath(model) {
		t.Errorf("layers %+v (checkpoint %v); want the registry's and the sidecar", s.Layers, s.Checkpoint)
	}
	p := s.Preprocess
	if !reflect.DeepEqual(s.Classes, side.Classes) || p.ChannelOrder != imageio.BGR || p.ValueScale != 0.5 || p.ValueOffset != -1 || p.Interpolation != imageio.Bilinear {
		t.Errorf("merged %+v %+v; want the sidecar's classes and channel order, the file's normalisation, the override's interpolation", s.Sidecar, *p)
	}
	if _, err := ModelSettings(model, filepath.Join(dir, "missing.json"), imageio.Sidecar{}); err == nil {
		t.Error("a missing settings file was not refused")
	}
	bad := imageio.Sidecar{Preprocess: &imageio.Preprocess{Resize: "sideways"}}
	if _, err := ModelSettings(model, "", bad); err == nil {
		t.Error("an invalid preprocessing was not refused")
	}
}

// A checkpoint's settings are its run's: no layers are read for it.
func TestModelSettingsOfCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := finetune.Config{ClassNames: []string{"bg", "person"}, Ignore: 7, LabelMap: "3:1;*:0",
		Preprocess: imageio.Preprocess{ValueScale: 2}}
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "best.ckpt")
	if err := checkpoint.Save(ck, &checkpoint.Checkpoint{BaseModel: "base.onnx", Config: js}); err != nil {
		t.Fatal(err)
	}
	s, err := ModelSettings(ck, "", imageio.Sidecar{Preprocess: &imageio.Preprocess{Interpolation: imageio.Nearest}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Checkpoint || s.Layers != nil || !reflect.DeepEqual(s.Classes, cfg.ClassNames) || *s.IgnoreLabel != 7 || s.LabelMap == nil ||
		s.Preprocess.ValueScale != 2 || s.Preprocess.Interpolation != imageio.Nearest {
		t.Errorf("checkpoint settings %+v %+v", s, *s.Preprocess)
	}
}

// Notices name settings by key: the caller calls them by its own names.
func TestNoticesNameSettingsByKey(t *testing.T) {
	flag := func(key string) string { return "--" + key }
	ns := Settings{}.Notices("m.onnx", false)
	if len(ns) != 1 {
		t.Fatalf("%d notices for a model without settings, want 1", len(ns))
	}
	got := setting.Rename(ns[0], flag).Error()
	for _, want := range []string{"m.onnx is not a known model", "set --value_scale/--value_offset or --mean/--std", "--preprocess FILE"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if ns := (Settings{}).Notices("m.onnx", true); len(ns) != 0 {
		t.Errorf("settings given: %v", ns)
	}
}
