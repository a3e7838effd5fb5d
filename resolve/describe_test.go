package resolve

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
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

// A file that is no ONNX model at all (a script, an annotation file, a
// PyTorch checkpoint, a zip) is an error of Layers, not unusable metadata
// to warn about and ignore while the command goes on to fail later.
func TestLayersRefuseAFileThatIsNotONNX(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"export.py":  "import torch\ntorch.onnx.export(m, x, 'm.onnx')\n",
		"coco.json":  `{"images": [], "annotations": [], "categories": []}`,
		"model.pth":  "PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl",
		"notes.onnx": "my model is somewhere else",
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, metaErr, err := Layers(p)
		var fe *onnx.FormatError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), p) || metaErr != nil {
			t.Errorf("%s: err %v, metadata error %v; want an *onnx.FormatError naming the file", name, err, metaErr)
		}
	}
}
