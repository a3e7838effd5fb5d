package finetune

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/setting"
)

// Monitored validation values for early stopping (Config.Monitor).
const (
	MonitorMIoU = "val.miou" // validation mean IoU, higher is better
	MonitorLoss = "val.loss" // validation cross entropy, lower is better
)

// KindStop is the metrics.jsonl record of an early stop.
const KindStop = "stop"

// checkEarlyStop checks Patience and Monitor before any file is read.
func (c *Config) checkEarlyStop() error {
	switch c.Monitor {
	case "", MonitorMIoU, MonitorLoss:
	default:
		return fmt.Errorf("monitor %q is neither %s nor %s", c.Monitor, MonitorMIoU, MonitorLoss)
	}
	switch {
	case c.Patience < 0:
		return fmt.Errorf("patience %d is negative", c.Patience)
	case c.Patience > 0 && !c.Val.Given():
		// Any validation the run has will do: a data folder's val split
		// as well as a pair of val folders.
		return &setting.Error{Setting: "patience", Value: strconv.Itoa(c.Patience),
			Err: errors.New("early stopping needs validation data (a data folder with a val split, or val images and masks), and this run has none")}
	}
	return nil
}

// monitor returns the monitored value's name, its metrics key and
// whether lower is better.
func (c *Config) monitor() (name, key string, lower bool) {
	if c.Monitor == MonitorLoss {
		return MonitorLoss, "val_loss", true
	}
	return MonitorMIoU, "val_miou", false
}

// earlyStop follows the monitored value epoch after epoch.
type earlyStop struct {
	patience int
	key      string // the value's name in checkpoint metrics
	lower    bool
	best     *float64 // the best monitored value so far
	stale    int      // epochs since it last improved
}

// observe records an epoch's value (NaN: none) and reports whether the
// run should stop: patience epochs without improvement.
func (e *earlyStop) observe(v float64) bool {
	if !math.IsNaN(v) && (e.best == nil || e.lower && v < *e.best || !e.lower && v > *e.best) {
		e.best, e.stale = &v, 0
	} else {
		e.stale++
	}
	return e.patience > 0 && e.stale >= e.patience
}

// epochEnd observes the epoch's metrics and records the state in them, for
// the checkpoint (restore reads it back on resume).
func (e *earlyStop) epochEnd(metrics map[string]float64) bool {
	v, ok := metrics[e.key]
	if !ok {
		v = math.NaN()
	}
	stop := e.observe(v)
	e.record(metrics)
	return stop
}

// record writes the state into a checkpoint's metrics.
func (e *earlyStop) record(metrics map[string]float64) {
	metrics["monitor_stale"] = float64(e.stale)
	if e.best != nil {
		metrics["monitor_best"] = *e.best
	}
}

// restore takes the state back from a checkpoint's metrics.
func (e *earlyStop) restore(metrics map[string]float64) {
	if v, ok := metrics["monitor_best"]; ok {
		e.best = &v
	}
	e.stale = int(metrics["monitor_stale"])
}

// setupEarlyStop ranks checkpoints by the monitored value and checks that
// the run can compute it.
func (t *runner) setupEarlyStop() error {
	_, key, lower := t.cfg.monitor()
	t.keeper.Metric, t.keeper.LowerIsBetter = key, lower
	t.stop = earlyStop{patience: t.cfg.Patience, key: key, lower: lower}
	if t.cfg.Monitor == MonitorLoss && !trainer.HasValidationLoss(t.ct) {
		return fmt.Errorf("%s: monitoring %s needs a head of class logits or probabilities, and this one is %s", t.cfg.Network.BaseModel, MonitorLoss, t.ct.Kind)
	}
	if t.cfg.Patience > 0 && t.par.Parallel() {
		return fmt.Errorf("early stopping (patience %d) runs in one process, not on %d ranks", t.cfg.Patience, t.par.Size())
	}
	return nil
}

// stopEarly logs the stop and records it in metrics.jsonl.
func (t *runner) stopEarly(epoch int) error {
	name, _, _ := t.cfg.monitor()
	t.stopped = true
	extra := map[string]float64{"patience": float64(t.stop.patience), "stale_epochs": float64(t.stop.stale)}
	best := "none yet"
	if t.stop.best != nil {
		best = fmt.Sprintf("%.4f", *t.stop.best)
		extra["best_"+t.stop.key] = *t.stop.best
	}
	fmt.Fprintf(t.hooks.Log, "early stop after epoch %d: %s has not improved for %d epochs (best %s); %s holds the best epoch\n",
		epoch+1, name, t.stop.stale, best, t.keeper.BestPath())
	return t.hist.Write(history.Record{Kind: KindStop, Epoch: int64(epoch), Step: t.steps, Extra: extra})
}
