package resolve

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
)

// The embedded model, copied under another name, is recognised by its
// digest: its settings come from the registry, its sidecar overrides the
// classes, and the description says which part comes from where.
func TestDescribeRecognisedModel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "renamed.onnx")
	if err := os.WriteFile(p, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	side := imageio.Sidecar{Version: 1, Classes: []string{"bg", "fg", "other"}}
	if err := side.Save(imageio.SidecarPath(p)); err != nil {
		t.Fatal(err)
	}
	d, err := Describe(p)
	if err != nil {
		t.Fatal(err)
	}
	registry := "registry (" + models.SynthName + ")"
	if d.Family != "CNN" || d.Contract == nil || d.ContractError != "" || len(d.UnsupportedOps) != 0 {
		t.Errorf("family %q, contract %+v (%s), unsupported %v", d.Family, d.Contract, d.ContractError, d.UnsupportedOps)
	}
	if d.SettingsFrom["preprocess"] != registry || d.SettingsFrom["classes"] != imageio.SidecarPath(p) {
		t.Errorf("settings from %v", d.SettingsFrom)
	}
	var text bytes.Buffer
	if err := d.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"family       CNN", "contract:", `classes       ["bg","fg","other"]  (from ` + imageio.SidecarPath(p)} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("description lacks %q:\n%s", want, text.String())
		}
	}
}

// A model that is not ONNX is refused by name.
func TestDescribeNotAModel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "junk.onnx")
	os.WriteFile(p, []byte("not a model"), 0o644)
	if _, err := Describe(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Describe(junk) = %v", err)
	}
}

func TestLayerNotice(t *testing.T) {
	known := Layer{From: "registry", Known: &models.Entry{Name: "deeplab"}}
	for l, want := range map[*Layer]string{
		&known:                   "m.onnx is deeplab (recognised by its SHA-256): using its preprocessing, classes and palette",
		{From: MetadataLayer}:    "using the settings m.onnx carries (" + MetadataLayer + ")",
		{From: "m.segtune.json"}: "using settings from m.segtune.json",
	} {
		if got := l.Notice("m.onnx"); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
