package finetune

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"time"

	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/runtime"
)

// validation is one scoring of the current weights on the validation set.
type validation struct {
	rep    metrics.Report
	groups map[string]metrics.Report
	// extra are the history's fields: val_miou, val_loss, val_pixel_acc,
	// each class's IoU, the size groups' mIoU and the size head's F1.
	extra map[string]float64
}

// validate scores the current weights on the validation set (rank 0),
// as segment runs the model (validationPreprocess). An interruption saves
// the current step and returns ErrInterrupted.
func (t *runner) validate(ctx context.Context) (*validation, error) {
	var avg [][]float32
	if t.ema != nil {
		avg = t.ema.avg
	}
	m, err := t.net.ValidationModel(avg)
	if err != nil {
		return nil, err
	}
	var groupOf func(int) string
	if t.sizer != nil {
		groupOf = func(id int) string { return t.sizer.group(t.val, id) }
	}
	ev, err := trainer.Evaluate(ctx, m, t.ct, t.val, validationPreprocess(t.cfg.Preprocess, t.ct), runtime.Options{Device: t.cfg.Device, Threads: t.cfg.Threads, Log: io.Discard}, t.cfg.ValDense, groupOf)
	if err != nil {
		if ctx.Err() != nil {
			return nil, t.interrupt()
		}
		return nil, fmt.Errorf("validation: %w", err)
	}
	v := &validation{rep: metrics.NewReport(ev.Overall, t.cfg.ClassNames), groups: map[string]metrics.Report{}, extra: map[string]float64{}}
	extra := v.extra
	if v.rep.MeanIoU != nil {
		extra["val_miou"] = *v.rep.MeanIoU
	}
	if v.rep.PixelAccuracy != nil {
		extra["val_pixel_acc"] = *v.rep.PixelAccuracy
	}
	if !math.IsNaN(ev.Loss) {
		extra["val_loss"] = ev.Loss
	}
	for _, c := range v.rep.Classes {
		if c.IoU != nil {
			extra["val_iou_"+c.Name] = *c.IoU
		}
	}
	for g, conf := range ev.Groups {
		gr := metrics.NewReport(conf, t.cfg.ClassNames)
		v.groups[g] = gr
		if gr.MeanIoU != nil {
			extra["val_miou_"+g] = *gr.MeanIoU
		}
	}
	if s, okS := extra["val_miou_small"]; okS {
		if l, okL := extra["val_miou_large"]; okL {
			extra["val_miou_gap"] = l - s
		}
	}
	if heads := t.net.SizeHeads(); heads > 0 && ev.Scores != nil {
		classes := make([]int, t.val.Len())
		seen := make([]bool, t.val.Len())
		scores := make([]float64, t.val.Len()*heads)
		for id, sc := range ev.Scores {
			classes[id], seen[id] = t.sizer.class(t.val, id), true
			for h, v := range sc {
				scores[id*heads+h] = float64(v)
			}
		}
		if f1, ok := metrics.SizeF1(scores, seen, classes, heads); ok {
			extra["size_f1_val"] = f1
		}
	}
	return v, nil
}

// validateBase validates the base model before the first step, on every
// run with validation data: epoch 0 of the progress lines, the table,
// metrics.jsonl (a history.KindBase record) and the curves, and the
// reference the end of the run compares the best epoch with. A resumed
// run keeps the record it has (trimHistory keeps step 0) and does not
// validate again; one interrupted during this validation (a checkpoint
// at step 0 without the record) does it when resumed.
func (t *runner) validateBase(ctx context.Context) error {
	if t.val == nil || t.steps > 0 || t.epoch > 0 || t.inEpoch > 0 {
		return nil
	}
	recs, err := history.Read(filepath.Join(t.dir, HistoryFile))
	if err != nil {
		return err
	}
	if len(history.Filter(recs, history.KindBase)) > 0 {
		return nil
	}
	t.hooks.enter("base")
	start := time.Now()
	v, err := t.validate(ctx)
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if err := t.hist.Write(history.Record{Kind: history.KindBase, Epoch: -1, Step: 0, Seconds: secs, Extra: v.extra}); err != nil {
		return err
	}
	if err := t.plot(); err != nil {
		fmt.Fprintf(t.hooks.Log, "warning: plotting the curves: %v\n", err)
	}
	if t.hooks.OnBase != nil {
		t.hooks.OnBase(EpochInfo{Epoch: -1, Seconds: secs, Val: &v.rep, Groups: v.groups, Base: true})
	}
	return nil
}

// BaseComparison is the end of a run's verdict: the best trained epoch
// against the base model, on the monitored validation value.
type BaseComparison struct {
	// Metric is the history's name of the monitored value: val_miou
	// (higher is better) or val_loss (lower is better).
	Metric string  `json:"metric"`
	Base   float64 `json:"base"`
	Best   float64 `json:"best"`
	// BestEpoch numbers the best trained epoch from 1, as the progress
	// lines do.
	BestEpoch int `json:"best_epoch"`
	// Beat reports whether the best epoch is strictly better than the base.
	Beat bool `json:"beat"`
}

// compareWithBase reads the base record and the best trained epoch from
// a run's history (nil when either is missing). key is the monitored
// value's name, lower whether lower is better.
func compareWithBase(recs []history.Record, key string, lower bool) *BaseComparison {
	bases := history.Filter(recs, history.KindBase)
	if len(bases) == 0 {
		return nil
	}
	base, ok := bases[len(bases)-1].Value(key)
	if !ok || math.IsNaN(base) {
		return nil
	}
	c := &BaseComparison{Metric: key, Base: base}
	found := false
	for _, r := range history.Filter(recs, history.KindEpoch) {
		v, ok := r.Value(key)
		if !ok || math.IsNaN(v) {
			continue
		}
		// The first of equal values, as best.ckpt keeps it.
		if !found || lower && v < c.Best || !lower && v > c.Best {
			c.Best, c.BestEpoch, found = v, int(r.Epoch)+1, true
		}
	}
	if !found {
		return nil
	}
	c.Beat = lower && c.Best < c.Base || !lower && c.Best > c.Base
	return c
}

// String is the run's last word on the base model. When no epoch beat it,
// model.onnx and best.ckpt still hold the best trained epoch (a fine-tune
// exports what it trained; the base is no checkpoint), and the line says
// the base model is the better one.
func (c *BaseComparison) String() string {
	name := map[string]string{"val_miou": "val mIoU", "val_loss": "val loss"}[c.Metric]
	if name == "" {
		name = c.Metric
	}
	if c.Beat {
		return fmt.Sprintf("epoch %d beat the base model: %s %.4f against the base's %.4f (%+.4f)",
			c.BestEpoch, name, c.Best, c.Base, c.Best-c.Base)
	}
	return fmt.Sprintf("no epoch beat the base model: the best, epoch %d, has %s %.4f against the base's %.4f (%+.4f); "+
		"%s and best.ckpt hold epoch %d, the best trained one, and the base model scores better as it is",
		c.BestEpoch, name, c.Best, c.Base, c.Best-c.Base, ModelFile, c.BestEpoch)
}
