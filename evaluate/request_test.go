package evaluate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models"
)

// A Request's plan scores what a plan built by hand from the same pairs
// scores; the model is opened only once the pairs are found.
func TestRequestPlan(t *testing.T) {
	ctx := context.Background()
	byHand, samples := synthPlan(t)
	model := filepath.Join(t.TempDir(), "synth.onnx")
	if err := os.WriteFile(model, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(v string) *storage.Folder {
		f, err := storage.OpenFolder(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	opened := 0
	req := evaluate.Request{Model: model, Settings: imageio.Sidecar{Preprocess: &byHand.Segmenter.Pre},
		Images: open(filepath.Dir(samples[0].Image)), Masks: open(filepath.Dir(samples[0].Mask)), Shard: shard.All, Batch: 2,
		Options: evaluate.SetupOptions{SizeClasses: []int{1, 2}},
		Open: func(path string, _ imageio.Sidecar) (*inference.Segmenter, error) {
			opened++
			if path != model {
				t.Errorf("opened %s; want %s", path, model)
			}
			return byHand.Segmenter, nil
		}}
	plan, err := req.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Total != len(samples) || plan.Setup.Images != req.Images.String() || plan.Setup.Model != model || plan.Batch != 2 || opened != 1 {
		t.Fatalf("plan of %d pairs, setup %+v, batch %d, opened %d times", plan.Total, plan.Setup, plan.Batch, opened)
	}
	got, err := evaluate.Run(ctx, plan)
	if err != nil {
		t.Fatal(err)
	}
	byHand.Setup = plan.Setup
	want, err := evaluate.Run(ctx, pairsOf(t, byHand, samples, shard.All))
	if err != nil {
		t.Fatal(err)
	}
	if g, w := summaryJSON(t, got), summaryJSON(t, want); g != w {
		t.Errorf("request's report %s\nhand-built plan's %s", g, w)
	}

	// Images without masks: refused before the model is opened.
	req.Masks = open(t.TempDir())
	if _, err := req.Plan(ctx); err == nil || opened != 1 {
		t.Errorf("no masks: %v (model opened %d times); want an error before opening", err, opened)
	}
	// Class names that do not fit the model: a *ClassNamesError.
	req.Masks, req.Options.ClassNames = open(filepath.Dir(samples[0].Mask)), []string{"a", "b"}
	var ce *evaluate.ClassNamesError
	if _, err := req.Plan(ctx); !errors.As(err, &ce) {
		t.Errorf("2 class names for 3 classes: %v; want a *ClassNamesError", err)
	}
}
