package evaluate

import (
	"context"
	"fmt"
	"io"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/report"
	"github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/metrics"
)

// Job is an evaluation as a program runs it (segtune eval): the model
// Settings name, scored on the opened labelled Data, one Shard of it;
// the report printed, the partial file and confusion files written where
// Settings say.
type Job struct {
	Settings
	Data  *Labelled
	Shard shard.Spec
	// ModelSettings are the model's settings; Masks say how masks are
	// read (their label map over the model's).
	ModelSettings imageio.Sidecar
	Masks         imageio.MaskOptions
	// Open opens the model (Request.Open). Batch, if set, is the images
	// per run the opened model takes of those asked (noting a cut);
	// otherwise its BatchFor.
	Open  func(path string, settings imageio.Sidecar) (*inference.Segmenter, error)
	Batch func(seg *inference.Segmenter, batch int) int
	// Print prints the report; its Prefix starts each notice, written to
	// Notes. Quiet draws no progress bar (one is drawn on a terminal).
	Print report.Printer
	Notes io.Writer
	Quiet bool
	// Name is what the program calls a setting (by key), in notices and
	// failed images' errors (nil: by key).
	Name func(key string) string
}

// Run plans the evaluation (Request.Plan), stops where Partial already
// holds this shard's complete scores, scores the pairs and reports: the
// partial file, the confusion files and the summary, an error when images
// failed.
func (j Job) Run(ctx context.Context) error {
	plan, err := j.plan(ctx)
	if err != nil {
		return err
	}
	defer plan.Segmenter.Close()
	if j.Partial != "" {
		if done, err := j.partialDone(ctx, NewPartial(j.Shard, plan.Setup)); err != nil || done {
			return err
		}
	}
	bar := progress.Items(plan.Total, "eval", progress.Shown(j.Quiet))
	plan.Progress = func(done, _ int) { bar.Set(done) }
	plan.Name = j.Name
	acc, err := Run(ctx, plan)
	bar.Finish()
	if err != nil {
		return fmt.Errorf("running %s: %w", j.Model, err)
	}
	if j.Partial != "" {
		if err := WritePartial(ctx, j.Partial, acc); err != nil {
			return setting.Messagef("{partial}: %w", err)
		}
		j.notef("wrote shard %s's scores to %s", acc.Shard, j.Partial)
	}
	if j.Shard.Sharded() {
		j.notef("the scores below are shard %s's alone; `segtune eval merge` combines the shards' {partial} files", j.Shard)
	}
	return acc.Summary().Output(j.Print, j.Confusion, j.Notes)
}

// plan is the evaluation's plan: this shard's pairs, the opened model
// (the caller closes plan.Segmenter) and how it is scored.
func (j Job) plan(ctx context.Context) (Plan, error) {
	req, err := j.Request(j.ModelSettings, j.Masks)
	if err != nil {
		return Plan{}, err
	}
	req.Images, req.Masks, req.Set, req.Shard, req.Open = j.Data.Images, j.Data.Masks, j.Data.Set, j.Shard, j.Open
	plan, err := req.Plan(ctx)
	if err != nil {
		return plan, PairsError(err)
	}
	if j.Batch != nil {
		plan.Batch = j.Batch(plan.Segmenter, req.Batch)
	}
	return plan, nil
}

// partialDone looks at an existing partial file before the work: this
// shard of this evaluation, complete, means the work is done (a retried
// worker stops there, printing the JSON summary when asked); anything
// else there is refused, not overwritten.
func (j Job) partialDone(ctx context.Context, acc *Partial) (bool, error) {
	old, err := ExistingPartial(ctx, j.Partial, acc)
	if err != nil {
		return false, setting.Usage(setting.Messagef("{partial} %w", err))
	}
	if old == nil {
		return false, nil
	}
	j.notef("%s already holds shard %s of this evaluation: nothing to do", j.Partial, acc.Shard)
	if j.Print.JSON {
		return true, report.JSON(j.Print.Out, old.Summary())
	}
	return true, nil
}

// notef writes a notice, naming settings by {key} (j.Name's way).
func (j Job) notef(format string, args ...any) {
	name := j.Name
	if name == nil {
		name = setting.Key
	}
	fmt.Fprintln(j.Notes, j.Print.Prefix+setting.Sprintf(name, format, args...))
}

// Output writes the confusion files into the folder confusion (if set,
// saying so on notes after p's prefix) and prints the summary with p: an
// error when images failed.
func (s Summary) Output(p report.Printer, confusion string, notes io.Writer) error {
	if confusion != "" {
		if err := metrics.WriteConfusionFiles(confusion, s.Matrix, s.ClassNames); err != nil {
			return setting.Messagef("{confusion}: %w", err)
		}
		fmt.Fprintf(notes, "%swrote the confusion matrix to %s\n", p.Prefix, confusion)
	}
	return s.Print(p)
}
