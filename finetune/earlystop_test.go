package finetune

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func TestEarlyStopCounts(t *testing.T) {
	e := earlyStop{patience: 2}
	for i, c := range []struct {
		v    float64
		stop bool
	}{{0.5, false}, {0.4, false}, {0.6, false}, {0.6, false}, {math.NaN(), true}} {
		if got := e.observe(c.v); got != c.stop {
			t.Errorf("epoch %d (%v): stop %v, want %v", i, c.v, got, c.stop)
		}
	}
	if *e.best != 0.6 || e.stale != 2 {
		t.Errorf("best %v, stale %d", *e.best, e.stale)
	}
	low := earlyStop{patience: 1, lower: true}
	if low.observe(1) || low.observe(0.5) || !low.observe(0.7) {
		t.Error("lower is better: 1, 0.5 improve, 0.7 does not")
	}
}

// With a learning rate too small to move a float32 weight, the monitored
// value never improves after the first epoch: patience 1 stops the run
// after the second, says so in the log and in metrics.jsonl, and best.ckpt
// stays the first epoch's.
func TestPatienceStops(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	for _, monitor := range []string{MonitorMIoU, MonitorLoss} {
		cfg := toyConfig(t, dir)
		cfg.Epochs, cfg.LR, cfg.Patience, cfg.Monitor = 6, 1e-30, 1, monitor
		out := filepath.Join(dir, strings.ReplaceAll(monitor, ".", "-"))
		var log bytes.Buffer
		if _, err := Train(context.Background(), cfg, out, false, Hooks{Log: &log}); err != nil {
			t.Fatal(err)
		}
		if want := "early stop after epoch 2: " + monitor + " has not improved for 1 epochs"; !strings.Contains(log.String(), want) {
			t.Errorf("%s: log %q lacks %q", monitor, log.String(), want)
		}
		recs, err := history.Read(filepath.Join(out, HistoryFile))
		if err != nil {
			t.Fatal(err)
		}
		epochs, stops := history.Filter(recs, history.KindEpoch), history.Filter(recs, KindStop)
		if len(epochs) != 2 || len(stops) != 1 || stops[0].Extra["patience"] != 1 || stops[0].Epoch != 1 {
			t.Errorf("%s: %d epochs, stop records %+v", monitor, len(epochs), stops)
		}
		if monitor == MonitorLoss {
			if v, ok := epochs[0].Extra["val_loss"]; !ok || !(v > 0) {
				t.Errorf("val_loss %v", epochs[0].Extra)
			}
		}
		best, err := checkpoint.Load(filepath.Join(out, checkpoint.BestName))
		if err != nil {
			t.Fatal(err)
		}
		if best.Epoch != 1 { // the loader's position after the first epoch
			t.Errorf("%s: best.ckpt is at epoch %d", monitor, best.Epoch)
		}
	}
}

// A resumed run counts the epochs without improvement on from where its
// checkpoint left them: 1 before the stop, 1 after it make patience 2.
func TestPatienceSurvivesResume(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs, cfg.LR, cfg.Patience = 2, 1e-30, 2
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	cfg.Epochs = 6
	if _, err := Train(context.Background(), cfg, out, true, Hooks{}); err != nil {
		t.Fatal(err)
	}
	recs, err := history.Read(filepath.Join(out, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	if e, s := history.Filter(recs, history.KindEpoch), history.Filter(recs, KindStop); len(e) != 3 || len(s) != 1 || s[0].Epoch != 2 {
		t.Errorf("%d epochs, stops %+v: want a stop after the third epoch", len(e), s)
	}
}

// --patience needs validation, and a data folder's val split is
// validation as much as a pair of val folders: only a run with neither is
// refused, naming the setting.
func TestPatienceAcceptsAnyValidation(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "data")
	toyData(t, root, "train", 4, 1)
	toyData(t, root, "val", 2, 2)
	fd, err := OpenData(root, datalayout.Options{}, false)
	if err != nil || !fd.Val.Given() || fd.Val.Images != "" {
		t.Fatalf("OpenData: %+v, %v: want a val split of the folder", fd.Val, err)
	}
	cfg := Config{Train: fd.Train, Val: fd.Val, Patience: 2}
	if err := cfg.checkEarlyStop(); err != nil {
		t.Errorf("patience with the folder's val split: %v", err)
	}
	cfg.Val = toyData(t, filepath.Join(dir, "pair"), "val", 1, 3)
	if err := cfg.checkEarlyStop(); err != nil {
		t.Errorf("patience with val folders: %v", err)
	}
	cfg.Val = DataSpec{}
	var se *setting.Error
	if err := cfg.checkEarlyStop(); !errors.As(err, &se) || se.Setting != "patience" || se.Value != "2" {
		t.Errorf("patience without validation: %v, want a setting.Error naming patience", err)
	}
}
