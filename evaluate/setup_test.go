package evaluate_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
)

// NewSetup identifies the model by its file's SHA-256, records the
// preprocessing as canonical JSON, takes the ignore label and class
// names from the caller, else the settings, else the defaults, and
// refuses class names that do not match the model's classes.
func TestNewSetup(t *testing.T) {
	plan, _ := synthPlan(t)
	seg := plan.Segmenter
	model := filepath.Join(t.TempDir(), "synth.onnx")
	if err := os.WriteFile(model, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(models.SynthModel)
	lm, err := imageio.ParseLabelMap("9:1;*:0")
	if err != nil {
		t.Fatal(err)
	}
	seven := 7
	settings := imageio.Sidecar{Preprocess: &imageio.Preprocess{Mean: []float64{0.5, 0.5, 0.5}, Std: []float64{0.25, 0.25, 0.25}},
		Classes: []string{"bg", "a", "b"}, LabelMap: lm, IgnoreLabel: &seven}
	o := evaluate.SetupOptions{Model: model, Images: "imgs", Masks: "masks", SizeClasses: []int{1},
		MaskPalette: imageio.Palette{{0, 0, 0, 255}, {255, 0, 0, 255}, {0, 255, 0, 255}}}
	run, err := evaluate.NewSetup(seg, settings, o)
	if err != nil {
		t.Fatal(err)
	}
	if run.ModelSHA256 != hex.EncodeToString(sum[:]) || run.Classes != 3 || run.Ignore != 7 ||
		strings.Join(run.ClassNames, ",") != "bg,a,b" || run.LabelMap != lm.String() || run.Images != "imgs" {
		t.Fatalf("setup %+v", run)
	}
	var pre map[string]any
	if err := json.Unmarshal(run.Preprocess, &pre); err != nil {
		t.Fatal(err)
	}
	if sorted, _ := json.Marshal(pre); string(sorted) != string(run.Preprocess) {
		t.Fatalf("preprocessing %s is not canonical (%s)", run.Preprocess, sorted)
	}
	if string(run.MaskPalette) != `["#000000","#ff0000","#00ff00"]` {
		t.Fatalf("mask palette %s", run.MaskPalette)
	}

	three := 3
	o.Ignore, o.ClassNames = &three, []string{"x", "y", "z"}
	if run, err = evaluate.NewSetup(seg, settings, o); err != nil || run.Ignore != 3 || run.ClassNames[0] != "x" {
		t.Fatalf("caller's ignore and names: %+v, %v", run, err)
	}
	o.Ignore, o.ClassNames = nil, nil
	if run, err = evaluate.NewSetup(seg, imageio.Sidecar{}, o); err != nil || run.Ignore != evaluate.DefaultIgnore ||
		run.ClassNames == nil || len(run.ClassNames) != 0 || run.Preprocess == nil {
		t.Fatalf("defaults: %+v, %v", run, err)
	}
	o.ClassNames = []string{"x", "y", "z", "w"}
	var ce *evaluate.ClassNamesError
	if _, err := evaluate.NewSetup(seg, settings, o); !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), model+": the model predicts 3 classes") {
		t.Fatalf("4 names for 3 classes: got %v", err)
	}
	o.ClassNames, o.Model = nil, filepath.Join(t.TempDir(), "absent.onnx")
	if _, err := evaluate.NewSetup(seg, settings, o); err == nil || !strings.Contains(err.Error(), "absent.onnx") {
		t.Fatalf("absent model file: got %v", err)
	}
}
