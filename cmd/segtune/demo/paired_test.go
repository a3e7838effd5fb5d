package demo

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
)

// PairedIoU compares the models' predictions with the masks image by
// image: a model predicting the masks exactly beats one predicting
// background everywhere on every validation image, and the verdict says
// so; the same model twice differs by nothing.
func TestPairedIoU(t *testing.T) {
	dir := t.TempDir()
	sc := Data(2, 6)
	if _, err := synth.Generate(dir, sc); err != nil {
		t.Fatal(err)
	}
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config(filepath.Join(dir, "m.onnx"), dir, sc, entry, 1, 1)
	dc := cfg.Val.DataConfig()
	dc.Ignore, dc.CacheBytes = cfg.Ignore, -1
	ds, _, err := data.Open(context.Background(), dc)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[string][]uint8{}
	for id := range ds.Len() {
		e, _ := ds.Example(id)
		s, err := ds.Load(id)
		if err != nil {
			t.Fatal(err)
		}
		truth[e.Image] = s.Labels
	}
	predict := func(model string, _ imageio.Preprocess, paths []string) (map[string][]uint8, error) {
		out := map[string][]uint8{}
		for _, p := range paths {
			out[p] = truth[p]
			if model == "background" {
				out[p] = make([]uint8, len(truth[p]))
			}
		}
		return out, nil
	}
	d, err := PairedIoU(context.Background(), cfg, "background", "exact", predict)
	if err != nil {
		t.Fatal(err)
	}
	if d.N != 6 || d.Mean <= 0 || d.Verdict() != "gain" {
		t.Errorf("exact over background: %+v, verdict %q", d, d.Verdict())
	}
	if d, err := PairedIoU(context.Background(), cfg, "exact", "exact", predict); err != nil || d.Mean != 0 {
		t.Errorf("a model against itself: %+v, %v", d, err)
	}
}
