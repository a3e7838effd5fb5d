package evaluate_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// synthPlan opens the embedded segtune-synth model and writes 6
// validation images with masks, as `segtune data synth` does.
func synthPlan(t *testing.T) (evaluate.Plan, []datalayout.Sample) {
	t.Helper()
	runtimetest.Require(t)
	m, err := onnx.Parse(models.SynthModel, "")
	if err != nil {
		t.Fatal(err)
	}
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := inference.Open(models.SynthModel, ct, entry.Preprocess, runtime.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seg.Close() })
	dir := t.TempDir()
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Train, cfg.Val = 7, 1, 6
	if _, err := synth.Generate(dir, cfg); err != nil {
		t.Fatal(err)
	}
	pairing, err := imageio.PairDataset(filepath.Join(dir, "images", "val"), filepath.Join(dir, "masks", "val"))
	if err != nil || len(pairing.Pairs) != 6 {
		t.Fatalf("val pairs: %v %v", pairing, err)
	}
	var samples []datalayout.Sample
	for _, p := range pairing.Pairs {
		samples = append(samples, datalayout.Sample{Image: p.Image, Mask: p.Mask})
	}
	run := evaluate.Setup{Model: "segtune-synth", Classes: 3, Ignore: 255, ClassNames: entry.Classes,
		SizeClasses: []int{1, 2}, Preprocess: json.RawMessage(`{}`)}
	return evaluate.Plan{Segmenter: seg, Setup: run, Shard: shard.All, Batch: 2}, samples
}

// pairsOf is plan with the samples of shard s.
func pairsOf(t *testing.T, plan evaluate.Plan, samples []datalayout.Sample, s shard.Spec) evaluate.Plan {
	pairs, total, err := evaluate.SamplePairs(samples, s)
	if err != nil {
		t.Fatal(err)
	}
	plan.Shard, plan.Pairs, plan.Total = s, pairs, total
	return plan
}

// summaryJSON is the report's JSON without its timing.
func summaryJSON(t *testing.T, p *evaluate.Partial) string {
	t.Helper()
	sum := p.Summary()
	sum.Seconds = 0
	data, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestRunAndMergedShardsAgree(t *testing.T) {
	plan, samples := synthPlan(t)
	ctx := context.Background()
	whole, err := evaluate.Run(ctx, pairsOf(t, plan, samples, shard.All))
	if err != nil {
		t.Fatal(err)
	}
	sum := whole.Summary()
	if sum.Images != 6 || sum.Failed != 0 || len(whole.Records) != 6 {
		t.Fatalf("images %d, failed %d, records %d", sum.Images, sum.Failed, len(whole.Records))
	}
	// Every labelled mask pixel is counted once, as the masks hold them.
	var labelled int64
	for _, s := range samples {
		m, err := imageio.ReadMask(s.Mask, imageio.MaskOptions{NumClasses: 3, Ignore: 255})
		if err != nil {
			t.Fatal(err)
		}
		labels, err := m.Uint8(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range labels {
			if l != 255 {
				labelled++
			}
		}
	}
	if sum.Pixels != labelled {
		t.Errorf("%d pixels scored, the masks label %d", sum.Pixels, labelled)
	}
	if sum.MeanIoU == nil || *sum.MeanIoU <= 0.3 || sum.Groups["small"].MeanIoU == nil {
		t.Errorf("mean IoU %v, groups %v", sum.MeanIoU, sum.Groups)
	}

	dir := t.TempDir()
	var files []string
	for k := range 2 {
		part, err := evaluate.Run(ctx, pairsOf(t, plan, samples, shard.Spec{Index: k, Count: 2}))
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "sub", "part-"+string(rune('0'+k))+".json")
		if err := evaluate.WritePartial(ctx, f, part); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	merged, err := evaluate.Merge(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summaryJSON(t, merged), summaryJSON(t, whole); got != want {
		t.Errorf("merged shards:\n%s\none run:\n%s", got, want)
	}

	if _, err := evaluate.Merge(ctx, files[:1]); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("one shard of two merged: %v", err)
	}
	if _, err := evaluate.Merge(ctx, []string{filepath.Join(dir, "absent.json")}); !storage.IsNotExist(err) {
		t.Errorf("absent partial: %v", err)
	}
	// A hand-edited count is named, not merged.
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"confusion":[`, `"confusion":[1`, 1)
	if err := os.WriteFile(files[0], []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	var perr *evaluate.PartialError
	if _, err := evaluate.Merge(ctx, files); !errors.As(err, &perr) || perr.File != files[0] {
		t.Errorf("edited partial: %v", err)
	}
}

func TestRunRecordsAnUnreadableMaskAsThatImagesFailure(t *testing.T) {
	plan, samples := synthPlan(t)
	bad := filepath.Join(t.TempDir(), filepath.Base(samples[1].Mask))
	if err := os.WriteFile(bad, []byte("not a PNG"), 0o644); err != nil {
		t.Fatal(err)
	}
	samples[1].Mask = bad
	acc, err := evaluate.Run(context.Background(), pairsOf(t, plan, samples, shard.All))
	if err != nil {
		t.Fatal(err)
	}
	sum := acc.Summary()
	if sum.Images != 6 || sum.Failed != 1 || sum.Failures[0].Path != samples[1].Image || len(acc.Records) != 5 {
		t.Fatalf("images %d, failed %d %+v, records %d", sum.Images, sum.Failed, sum.Failures, len(acc.Records))
	}
	if !strings.Contains(sum.Failures[0].Error, bad) {
		t.Errorf("failure %q does not name the mask", sum.Failures[0].Error)
	}
	// Name calls the settings the recorded failures name (here the memory
	// limit, each image over it) its program's way.
	plan, samples = synthPlan(t)
	plan = pairsOf(t, plan, samples, shard.All)
	plan.Name = func(key string) string { return "--" + key }
	memlimit.Set(1 << 10)
	defer memlimit.Set(0)
	if acc, err = evaluate.Run(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	if f := acc.Summary().Failures; len(f) == 0 || !strings.Contains(f[0].Error, "(--max_memory): lower --size or --scale") {
		t.Errorf("failures %+v, want them naming --max_memory", f)
	}
}

func TestRunStopsAtAPairingError(t *testing.T) {
	plan, samples := synthPlan(t)
	plan = pairsOf(t, plan, samples[:2], shard.All)
	broken := errors.New("the listing changed")
	pairs := plan.Pairs
	plan.Pairs = func(yield func(datalayout.Sample, error) bool) {
		for s := range pairs {
			if !yield(s, nil) {
				return
			}
		}
		yield(datalayout.Sample{}, broken)
	}
	if _, err := evaluate.Run(context.Background(), plan); !errors.Is(err, broken) {
		t.Errorf("err = %v, want the pairing's", err)
	}
}
