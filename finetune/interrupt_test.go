package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// epochRows are a run's metrics.jsonl epoch lines without their timing,
// which no two runs share.
func epochRows(t *testing.T, dir string) []history.Record {
	t.Helper()
	recs, err := history.Read(filepath.Join(dir, HistoryFile))
	if err != nil {
		t.Fatal(err)
	}
	rows := history.Filter(recs, history.KindEpoch)
	for i := range rows {
		rows[i].Seconds = 0
	}
	return rows
}

// Ctrl-C at any part of a run (a training step, validation, the
// checkpoint, the curves; the last epoch's and an earlier one's) loses
// nothing: resuming ends with the uninterrupted run's metrics.jsonl epoch
// lines, best epoch, best.ckpt and curves.
func TestInterruptAtEachPhaseResumes(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	cfg := toyConfig(t, dir)
	cfg.Epochs = 2 // 3 steps each
	full := filepath.Join(dir, "full")
	if _, err := Train(context.Background(), cfg, full, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	want := epochRows(t, full)
	wantBest, err := checkpoint.ReadInfo(filepath.Join(full, checkpoint.BestName))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		phase string
		epoch int // the epoch (from 0) it interrupts
	}{
		{"step", 1}, {"validate", 0}, {"validate", 1}, {"checkpoint", 1}, {"curves", 1},
	} {
		name := fmt.Sprintf("%s-%d", c.phase, c.epoch)
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, name)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			epoch := 0
			hooks := Hooks{OnEpoch: func(EpochInfo) { epoch++ }, phase: func(p string) {
				if p == c.phase && epoch == c.epoch {
					cancel()
				}
			}}
			hooks.OnStep = func(s StepInfo) {
				if c.phase == "step" && s.Epoch == c.epoch && s.StepInEpoch == 2 {
					cancel()
				}
			}
			_, err := Train(ctx, cfg, out, false, hooks)
			if err != nil && !errors.Is(err, ErrInterrupted) {
				t.Fatal(err)
			}
			if c.phase == "validate" {
				// The checkpoint says which epoch still needs its validation.
				ck, err := checkpoint.Load(filepath.Join(out, checkpoint.LastName))
				if err != nil {
					t.Fatal(err)
				}
				var ds dataState
				if err := json.Unmarshal(ck.DataState, &ds); err != nil || ds.Unvalidated == nil || ds.Unvalidated.Epoch != c.epoch {
					t.Fatalf("data state %s (%v): want epoch %d unvalidated", ck.DataState, err, c.epoch)
				}
			}
			if errors.Is(err, ErrInterrupted) {
				if _, err := Train(context.Background(), cfg, out, true, Hooks{}); err != nil {
					t.Fatal(err)
				}
			}
			if got := epochRows(t, out); !reflect.DeepEqual(got, want) {
				t.Errorf("epoch lines\n%+v\nwant\n%+v", got, want)
			}
			best, err := checkpoint.ReadInfo(filepath.Join(out, checkpoint.BestName))
			if err != nil {
				t.Fatal(err)
			}
			if best.Epoch != wantBest.Epoch || best.Step != wantBest.Step {
				t.Errorf("best.ckpt at epoch %d step %d, want epoch %d step %d", best.Epoch, best.Step, wantBest.Epoch, wantBest.Step)
			}
			if _, err := os.Stat(filepath.Join(out, PlotFile)); err != nil {
				t.Error(err)
			}
		})
	}
}
