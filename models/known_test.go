package models_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
)

func TestKnownEntriesAreConsistent(t *testing.T) {
	known := models.Known()
	if len(known) < 3 {
		t.Fatalf("%d known models", len(known))
	}
	seen := map[string]bool{}
	for _, e := range known {
		if e.Name == "" || e.Name != strings.ToLower(e.Name) || strings.ContainsAny(e.Name, " \t") || seen[e.Name] {
			t.Errorf("name %q: want a unique lower-case name without spaces", e.Name)
		}
		seen[e.Name] = true
		if e.Description == "" || e.Architecture == "" || e.File == "" || e.Location == "" {
			t.Errorf("%s: description, architecture, file and location are required", e.Name)
		}
		if err := e.Preprocess.Validate(); err != nil {
			t.Errorf("%s: preprocess: %v", e.Name, err)
		}
		sc := e.Sidecar()
		if err := sc.Validate(); err != nil {
			t.Errorf("%s: sidecar: %v", e.Name, err)
		}
		if len(e.Classes) < 2 || len(e.Palette) != len(e.Classes) {
			t.Errorf("%s: %d classes, %d palette colours", e.Name, len(e.Classes), len(e.Palette))
		}
		for ds, spec := range e.LabelMaps {
			if _, err := imageio.ParseLabelMap(spec); err != nil {
				t.Errorf("%s: label map for %s: %v", e.Name, ds, err)
			}
		}
		got, err := models.Lookup(strings.ToUpper(e.Name))
		if err != nil || got.Name != e.Name {
			t.Errorf("Lookup(%q) = %q, %v", strings.ToUpper(e.Name), got.Name, err)
		}
	}
	// Entries are copies.
	known[0].Classes[0] = "changed"
	known[0].LabelMaps["changed"] = "*:0"
	if again := models.Known(); again[0].Classes[0] == "changed" || again[0].LabelMaps["changed"] != "" {
		t.Error("Known hands out the registry itself")
	}
	if _, err := models.Lookup("resnet"); err == nil || !strings.Contains(err.Error(), models.SynthName) {
		t.Errorf("Lookup of an unknown name: %v; want an error listing the known names", err)
	}
}

// The synth entry describes the network DeepLabV3Plus builds by default
// and the data set models/synth generates.
func TestSynthEntry(t *testing.T) {
	e, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Embedded || !e.Dynamic {
		t.Errorf("%s: embedded %v, dynamic %v", e.Name, e.Embedded, e.Dynamic)
	}
	if !slices.Equal(e.Classes, synth.ClassNames) || models.DefaultDeepLabConfig().Classes != len(synth.ClassNames) {
		t.Errorf("classes %v, synth %v, default network %d", e.Classes, synth.ClassNames, models.DefaultDeepLabConfig().Classes)
	}
	if d := synth.DefaultConfig(); e.Height != d.Height || e.Width != d.Width {
		t.Errorf("size %dx%d, synth %dx%d", e.Height, e.Width, d.Height, d.Width)
	}
	if _, err := e.Locate(t.TempDir()); err == nil || !strings.Contains(err.Error(), e.File) {
		t.Errorf("Locate in an empty folder: %v", err)
	}
}

// The shared person models are where the registry says, with its classes
// and input size.
func TestPersonEntriesMatchTheirFiles(t *testing.T) {
	dir := testassets.Require(t, "models")
	for _, name := range []string{"deeplabv3plus-person-dynamic", "deeplabv3plus-person-513"} {
		e, err := models.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		path, err := e.Locate(t.TempDir(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(path) != dir {
			t.Errorf("%s located at %s", name, path)
		}
		m, err := onnx.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		s := m.Summary()
		in, out := s.Inputs[0].Dims, s.Outputs[0].Dims
		if len(in) != 4 || len(out) != 4 || out[1] != "2" || len(e.Classes) != 2 {
			t.Fatalf("%s: input %v, output %v, classes %v", name, in, out, e.Classes)
		}
		fixed := in[2] == "513" && in[3] == "513"
		if fixed == e.Dynamic || (!e.Dynamic && (e.Preprocess.Height != 513 || e.Preprocess.Width != 513)) {
			t.Errorf("%s: input %v but dynamic %v, preprocess %dx%d", name, in, e.Dynamic, e.Preprocess.Height, e.Preprocess.Width)
		}
	}
}
