package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// Defect: a model fine-tuned from a registry model forgot how to be fed
// (eval fed it raw 0..255 values). Its model.onnx now carries the run's
// settings: eval without a preprocessing flag scores exactly what it
// scores with the flags, with its sidecar and, the sidecar deleted, from
// its metadata_props alone; info says where each part comes from.
func TestFinetunedRegistryModelCarriesItsSettings(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := testassets.Require(t, "data", "camvid")
	t.Setenv(resolve.SharedAssetsEnv, filepath.Dir(filepath.Dir(model)))
	dir := t.TempDir()
	// One training image and one held-out image, both with people.
	link := func(split, name, to string) {
		for _, kind := range []string{"images", "masks"} {
			src := filepath.Join(camvid, kind, "val", name)
			if _, err := os.Stat(src); err != nil {
				t.Skipf("CamVid val image %s: %v", name, err)
			}
			d := filepath.Join(dir, to, kind, split)
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(src, filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	link("train", "0016E5_08131.png", "data")
	link("test", "0016E5_08121.png", "held")
	run := filepath.Join(dir, "run")
	if _, err := runCLI(t, "finetune", "--model", "deeplabv3plus-person-dynamic", "--data", filepath.Join(dir, "data"),
		"--out", run, "--label-map", models.CamVidPersonLabelMap, "--epochs", "1", "--batch", "1", "--crop", "65x65",
		"--threads", "2"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(run, "model.onnx")
	eval := func(extra ...string) string {
		t.Helper()
		stdout, err := runCLI(t, append([]string{"eval", "--model", out, "--images", filepath.Join(dir, "held", "images", "test"),
			"--masks", filepath.Join(dir, "held", "masks", "test"), "--label-map", models.CamVidPersonLabelMap,
			"--threads", "2", "--json"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Classes []struct {
				Name string   `json:"name"`
				IoU  *float64 `json:"iou"`
			} `json:"classes"`
		}
		if err := json.Unmarshal([]byte(stdout), &r); err != nil || len(r.Classes) != 2 || r.Classes[1].Name != "person" {
			t.Fatalf("eval output %q (%v): want the classes background and person", stdout, err)
		}
		b, _ := json.Marshal(r.Classes)
		return string(b)
	}
	// The run kept the registry's contract, its 2× included: its
	// model.onnx is fed as the base model is.
	want := eval(personPreprocess...)
	if got := eval(); got != want {
		t.Errorf("no flags, with the sidecar: %s\nwith the flags: %s", got, want)
	}
	if err := os.Remove(imageio.SidecarPath(out)); err != nil {
		t.Fatal(err)
	}
	if got := eval(); got != want {
		t.Errorf("no flags, metadata_props alone: %s\nwith the flags: %s", got, want)
	}
	// export reads them from metadata_props and writes them on.
	exported := filepath.Join(dir, "exported.onnx")
	if _, err := runCLI(t, "export", "--model", out, "--out", exported, "--threads", "2"); err != nil {
		t.Fatal(err)
	}
	ran, found, err := models.EmbeddedSettings(out)
	if err != nil || !found {
		t.Fatalf("%s: %v, found %v", out, err, found)
	}
	for _, read := range []func(string) (*imageio.Sidecar, bool, error){models.EmbeddedSettings, imageio.LoadModelSidecar} {
		if got, found, err := read(exported); err != nil || !found || !reflect.DeepEqual(got, ran) {
			t.Errorf("exported model's settings %+v (found %v, %v); want the run's %+v", got, found, err, ran)
		}
	}
	stdout, err := runCLI(t, "info", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"preprocess", "classes", "palette", "label_map"} {
		if !strings.Contains(stdout, part) || !lineHas(stdout, part, "from "+resolve.MetadataLayer) {
			t.Errorf("info does not show %s from metadata_props:\n%s", part, stdout)
		}
	}
}

// lineHas reports whether a line of text starting (after spaces) with
// prefix contains sub.
func lineHas(text, prefix, sub string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) && strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// modelSettingsFor are the settings of model with the preprocessing
// flags parsed from args.
func modelSettingsFor(t *testing.T, model string, args ...string) (imageio.Sidecar, error) {
	t.Helper()
	var o preprocessOptions
	set := flag.NewFlagSet("test", flag.ContinueOnError)
	for _, f := range preprocessFlags(&o) {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	set.Bool("quiet", true, "")
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
	s, err := o.modelSettings(cli.NewContext(cli.NewApp(), set, nil), model)
	return s.Sidecar, err
}

// synthWith writes the embedded synth model to dir with its metadata
// changed by set.
func synthWith(t *testing.T, dir string, set func(m *onnx.Model)) string {
	t.Helper()
	m, err := onnx.Parse(models.SynthModel, "")
	if err != nil {
		t.Fatal(err)
	}
	set(m)
	p := filepath.Join(dir, "m.onnx")
	if err := m.Save(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// Precedence: flags over the sidecar over metadata_props, field by field
// (metadata_props over the registry and the defaults is what the test
// above shows).
func TestModelSettingsPrecedence(t *testing.T) {
	dir := t.TempDir()
	meta := imageio.Sidecar{Version: 1, Classes: []string{"meta0", "meta1"}, Palette: imageio.Palette{{1, 2, 3, 255}, {4, 5, 6, 255}},
		Preprocess: &imageio.Preprocess{ValueScale: 0.5, ValueOffset: -3, ChannelOrder: imageio.BGR}}
	model := synthWith(t, dir, func(m *onnx.Model) {
		if err := models.EmbedSettings(m, meta); err != nil {
			t.Fatal(err)
		}
	})
	s, err := modelSettingsFor(t, model)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Classes, meta.Classes) || s.Preprocess.ValueScale != 0.5 || s.Preprocess.ChannelOrder != imageio.BGR {
		t.Errorf("metadata_props alone: %+v %+v", s, *s.Preprocess)
	}
	side := imageio.Sidecar{Version: 1, Classes: []string{"side0", "side1"}, Preprocess: &imageio.Preprocess{ValueScale: 0.25}}
	if err := side.Save(imageio.SidecarPath(model)); err != nil {
		t.Fatal(err)
	}
	s, err = modelSettingsFor(t, model)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Classes, side.Classes) || !reflect.DeepEqual(s.Palette, meta.Palette) ||
		s.Preprocess.ValueScale != 0.25 || s.Preprocess.ValueOffset != 0 || s.Preprocess.ChannelOrder != imageio.BGR {
		t.Errorf("sidecar over metadata_props: %+v %+v", s, *s.Preprocess)
	}
	s, err = modelSettingsFor(t, model, "--value-scale", "2", "--value-offset", "1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Preprocess.ValueScale != 2 || s.Preprocess.ValueOffset != 1 || !reflect.DeepEqual(s.Classes, side.Classes) {
		t.Errorf("flags over the sidecar: %+v %+v", s, *s.Preprocess)
	}
	layers, metaErr, err := resolve.Layers(model)
	if err != nil || metaErr != nil {
		t.Fatal(err, metaErr)
	}
	from := resolve.Origins(layers)
	if from["classes"] != imageio.SidecarPath(model) || from["palette"] != resolve.MetadataLayer {
		t.Errorf("origins %v", from)
	}
}

// Hostile metadata_props (bad JSON, a wrong type, a value over the
// sidecar limit) is ignored with a warning naming the model and the key:
// the settings fall back to the sidecar, and info shows why.
func TestHostileMetadataIgnored(t *testing.T) {
	for name, value := range map[string]string{
		"bad JSON":   `{"classes": [`,
		"wrong type": `{"version": "1"}`,
		"too large":  `{"classes": ["` + strings.Repeat("a", imageio.MaxSidecarBytes+1) + `"]}`,
	} {
		dir := t.TempDir()
		model := synthWith(t, dir, func(m *onnx.Model) { m.SetMetadata(imageio.ContractKey, value) })
		side := imageio.Sidecar{Version: 1, Classes: []string{"a", "b"}}
		if err := side.Save(imageio.SidecarPath(model)); err != nil {
			t.Fatal(err)
		}
		layers, metaErr, err := resolve.Layers(model)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if metaErr == nil || !strings.Contains(metaErr.Error(), model) || !strings.Contains(metaErr.Error(), imageio.ContractKey) {
			t.Errorf("%s: metadata error %v; want one naming %s and %s", name, metaErr, model, imageio.ContractKey)
		}
		if len(layers) != 1 || layers[0].From != imageio.SidecarPath(model) {
			t.Errorf("%s: layers %+v; want the sidecar alone", name, layers)
		}
		stdout, err := runCLI(t, "info", model)
		if err != nil || !strings.Contains(stdout, "metadata_props "+imageio.ContractKey+" ignored") {
			t.Errorf("%s: info says\n%s(%v)", name, stdout, err)
		}
	}
}
