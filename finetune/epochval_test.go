package finetune

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The end line names the best epoch and its gain over the base, or says
// that no epoch beat the base and what model.onnx then holds; lower is
// better for the validation loss.
func TestCompareWithBase(t *testing.T) {
	rec := func(kind string, epoch int64, miou, loss float64) history.Record {
		return history.Record{Kind: kind, Epoch: epoch, Extra: map[string]float64{"val_miou": miou, "val_loss": loss}}
	}
	recs := []history.Record{rec(history.KindBase, -1, 0.50, 0.30), rec(history.KindEpoch, 0, 0.40, 0.35), rec(history.KindEpoch, 1, 0.55, 0.31), rec(history.KindEpoch, 2, 0.55, 0.20)}
	c := compareWithBase(recs, "val_miou", false)
	if c == nil || !c.Beat || c.BestEpoch != 2 || c.Best != 0.55 || c.Base != 0.50 {
		t.Fatalf("val mIoU: %+v; want epoch 2 (the first of the ties) beating 0.50 with 0.55", c)
	}
	if s := c.String(); !strings.Contains(s, "epoch 2 beat the base model") || !strings.Contains(s, "+0.0500") {
		t.Errorf("line %q", s)
	}
	if c := compareWithBase(recs, "val_loss", true); c == nil || !c.Beat || c.BestEpoch != 3 || c.Best != 0.20 {
		t.Errorf("val loss: %+v; want epoch 3 at 0.20", c)
	}
	recs[0].Extra["val_miou"] = 0.60
	c = compareWithBase(recs, "val_miou", false)
	if c == nil || c.Beat {
		t.Fatalf("base 0.60: %+v; want no epoch beating it", c)
	}
	if s := c.String(); !strings.Contains(s, "no epoch beat the base model") || !strings.Contains(s, "-0.0500") || !strings.Contains(s, ModelFile+" and best.ckpt hold epoch 2") {
		t.Errorf("line %q", s)
	}
	if c := compareWithBase(recs[1:], "val_miou", false); c != nil {
		t.Errorf("no base record: %+v; want nil", c)
	}
}

// Every run validates the base model before the first step: epoch 0 of
// metrics.jsonl, the table and the progress lines, scored as validation
// scores every epoch. A resumed run keeps that record and does not
// validate the base again.
func TestBaseValidatedFirstAndKeptOnResume(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 1
	out := filepath.Join(dir, "run")
	var bases []EpochInfo
	hooks := Hooks{OnBase: func(e EpochInfo) { bases = append(bases, e) }}
	if _, err := Train(context.Background(), cfg, out, false, hooks); err != nil {
		t.Fatal(err)
	}
	if len(bases) != 1 || !bases[0].Base || bases[0].Val == nil || bases[0].Val.MeanIoU == nil {
		t.Fatalf("base validations %+v: want one, with a val mIoU", bases)
	}
	if line := bases[0].String(); !strings.HasPrefix(line, "epoch   0  base model") || !strings.Contains(line, "val mIoU") {
		t.Errorf("progress line %q", line)
	}
	cfg.Epochs = 2
	res, err := Train(context.Background(), cfg, out, true, hooks)
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) != 1 {
		t.Errorf("the resumed run validated the base again (%d times in all)", len(bases))
	}
	recs, err := history.Read(filepath.Join(out, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	got := history.Filter(recs, history.KindBase)
	if len(got) != 1 || recs[0].Kind != history.KindBase || got[0].Epoch != -1 || got[0].Step != 0 || !math.IsNaN(got[0].Loss) {
		t.Fatalf("base records %+v (first record %+v): want one, first, at epoch -1 and step 0 without a loss", got, recs[0])
	}
	if v, _ := got[0].Value("val_miou"); v != *bases[0].Val.MeanIoU {
		t.Errorf("metrics.jsonl's base val mIoU %v, the progress line's %v", v, *bases[0].Val.MeanIoU)
	}
	if len(history.Filter(recs, history.KindEpoch)) != 2 {
		t.Errorf("epoch records: %d, want 2", len(history.Filter(recs, history.KindEpoch)))
	}
	if res.Table == nil || len(res.Table.Rows) != 3 || res.Table.Rows[0][0] != "0" || res.Table.Rows[0][2] != "-" {
		t.Errorf("table:\n%v\nwant epoch 0 (no loss) and epochs 1 and 2", res.Table)
	}
	if res.Base == nil || res.Base.Metric != "val_miou" || res.Base.Base != *bases[0].Val.MeanIoU || res.Base.BestEpoch < 1 {
		t.Errorf("comparison %+v", res.Base)
	}
}

// A run interrupted while it validates the base model validates it when
// resumed; one interrupted after that validation, before its first step,
// keeps the record and does not validate again.
func TestBaseValidationSurvivesInterruption(t *testing.T) {
	runtimetest.Require(t)
	for _, during := range []bool{true, false} {
		dir := t.TempDir()
		cfg := toyConfig(t, dir)
		cfg.Epochs = 1
		out := filepath.Join(dir, "run")
		ctx, cancel := context.WithCancel(context.Background())
		bases := 0
		hooks := Hooks{OnBase: func(EpochInfo) { bases++; cancel() }}
		if during {
			hooks.phase = func(p string) {
				if p == "base" {
					cancel()
				}
			}
		}
		if _, err := Train(ctx, cfg, out, false, hooks); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("during %v: %v; want ErrInterrupted", during, err)
		}
		hooks.phase = nil
		if _, err := Train(context.Background(), cfg, out, true, hooks); err != nil {
			t.Fatal(err)
		}
		recs, err := history.Read(filepath.Join(out, HistoryFile))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(history.Filter(recs, history.KindBase)); n != 1 || bases != 1 {
			t.Errorf("interrupted during the base's validation %v: %d base records, %d validations; want 1 and 1", during, n, bases)
		}
	}
}
