package models

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/onnx"
)

// savedWithContract writes the embedded synth model to a temporary file
// after set has changed it.
func savedWithContract(t *testing.T, set func(m *onnx.Model)) string {
	t.Helper()
	m, err := onnx.Parse(SynthModel, "")
	if err != nil {
		t.Fatal(err)
	}
	set(m)
	p := filepath.Join(t.TempDir(), "m.onnx")
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every part of the settings survives the trip through metadata_props.
func TestEmbeddedSettingsRoundTrip(t *testing.T) {
	e, err := Lookup("deeplabv3plus-person-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	want := e.Sidecar()
	lm, err := imageio.ParseLabelMap(CamVidPersonLabelMap)
	if err != nil {
		t.Fatal(err)
	}
	ignore := 255
	want.LabelMap, want.IgnoreLabel = lm, &ignore
	want.Preprocess.ChannelOrder = imageio.BGR
	want.Output = &imageio.OutputSpec{Layout: "NCHW", Threshold: 0.3}
	p := savedWithContract(t, func(m *onnx.Model) {
		if err := EmbedSettings(m, want); err != nil {
			t.Fatal(err)
		}
	})
	got, found, err := EmbeddedSettings(p)
	if err != nil || !found {
		t.Fatalf("EmbeddedSettings: %v, found %v", err, found)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", *got, want)
	}

	plain := savedWithContract(t, func(*onnx.Model) {})
	if _, found, err := EmbeddedSettings(plain); err != nil || found {
		t.Errorf("a model without settings: found %v, %v", found, err)
	}
}

// A hostile value (bad JSON, a wrong type, an unknown field, invalid
// settings, one too large) is an error naming the model and the key.
func TestEmbeddedSettingsHostile(t *testing.T) {
	for name, value := range map[string]string{
		"bad JSON":      `{"version": 1, "classes": [`,
		"wrong type":    `{"version": 1, "classes": "person"}`,
		"unknown field": `{"version": 1, "preprocesss": {}}`,
		"invalid":       `{"version": 1, "preprocess": {"value_scale": 1, "mean": [0.5]}}`,
		"newer version": `{"version": 99}`,
		"trailing data": `{"version": 1} {}`,
		"too large":     `{"version": 1, "classes": ["` + strings.Repeat("a", imageio.MaxSidecarBytes) + `"]}`,
	} {
		p := savedWithContract(t, func(m *onnx.Model) { m.SetMetadata(imageio.ContractKey, value) })
		_, found, err := EmbeddedSettings(p)
		if err == nil || found || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), imageio.ContractKey) {
			t.Errorf("%s: found %v, %v; want an error naming %s and %s", name, found, err, p, imageio.ContractKey)
		}
	}
}
