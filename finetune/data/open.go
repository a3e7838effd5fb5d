package data

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/metrics"
)

// Open pairs cfg.ImageDir with cfg.MaskDir by name (or lists the samples
// of cfg.Data's layout), decodes and validates
// every example in parallel, computes class statistics and caches pixels
// within the budget. A bad example fails Open with an error naming the
// file, unless cfg.SkipBad is set: then it is left out and described in
// problems. Cancelling ctx stops the decoding.
func Open(ctx context.Context, cfg Config) (ds *Dataset, problems []Problem, err error) {
	if len(cfg.ClassNames) > 0 && cfg.NumClasses == 0 {
		cfg.NumClasses = len(cfg.ClassNames)
	}
	if err := cfg.validate(); err != nil {
		return nil, nil, err
	}
	samples, problems, err := listSamples(&cfg)
	if err != nil {
		return nil, nil, err
	}
	results, err := decodeAll(ctx, &cfg, samples)
	if err != nil {
		return nil, problems, err
	}
	ds = &Dataset{cfg: cfg, ignore: uint8(cfg.ignore())}
	maxLabel := -1
	for i, r := range results {
		if r.err != nil {
			var p Problem
			if !errors.As(r.err, &p) {
				p = Problem{Path: samples[i].Image, Err: r.err}
			}
			problems = append(problems, p)
			continue
		}
		ds.examples = append(ds.examples, r.example)
		maxLabel = max(maxLabel, r.maxLabel)
		if r.rgb != nil {
			ds.cached++
			ds.cacheBytes += int64(len(r.rgb) + len(r.labels))
		}
	}
	if len(ds.examples) == 0 {
		return nil, problems, fmt.Errorf("data set: all %d examples in %s are bad, the first: %w",
			len(samples), cfg.source(), problems[0])
	}
	ds.numClasses = cfg.NumClasses
	if ds.numClasses == 0 {
		ds.numClasses = max(maxLabel+1, 1)
	}
	for i := range ds.examples {
		x := &ds.examples[i]
		x.counts = slices.Clone(x.counts[:ds.numClasses])
	}
	return ds, problems, nil
}

// listSamples returns the samples of cfg's data; the files that pair
// with nothing fail it, or, with SkipBad, come back as problems.
func listSamples(cfg *Config) ([]datalayout.Sample, []Problem, error) {
	var samples []datalayout.Sample
	var problems []Problem
	if cfg.Data != "" {
		set, err := datalayout.Open(cfg.Data, datalayout.Options{Format: cfg.Format, Split: cfg.Split, CrowdAsClass: cfg.CrowdAsClass})
		if err != nil {
			return nil, nil, err
		}
		if err := set.Err(); err != nil && !cfg.SkipBad {
			return nil, nil, err
		}
		for _, u := range set.Unmatched {
			problems = append(problems, Problem{Path: u.Path, Err: fmt.Errorf("%s: %s", u.Path, u.Why)})
		}
		samples = set.Samples
	} else {
		pairing, err := imageio.PairDataset(cfg.ImageDir, cfg.MaskDir)
		if err != nil {
			return nil, nil, err
		}
		if err := pairing.Err(); err != nil && !cfg.SkipBad {
			return nil, nil, err
		}
		for _, f := range pairing.ImagesWithoutMask {
			problems = append(problems, Problem{Path: f, Err: fmt.Errorf("image %s has no mask", f)})
		}
		for _, f := range pairing.MasksWithoutImage {
			problems = append(problems, Problem{Path: f, Err: fmt.Errorf("mask %s has no image", f)})
		}
		for _, p := range pairing.Pairs {
			samples = append(samples, datalayout.Sample{Image: p.Image, Mask: p.Mask, Name: sampleName(cfg.ImageDir, p.Image)})
		}
	}
	if cfg.ValSplit != nil && len(samples) > 0 {
		train, val, err := cfg.ValSplit.Divide(samples)
		if err != nil {
			return nil, problems, fmt.Errorf("data set: %s: %w", cfg.source(), err)
		}
		if samples = train; cfg.HeldOut {
			samples = val
		}
	}
	if len(samples) == 0 {
		return nil, problems, fmt.Errorf("data set: no image/mask pairs in %s", cfg.source())
	}
	return samples, problems, nil
}

// sampleName names an image of a folder pair as datalayout names samples:
// its path below dir, without extension, slash separated.
func sampleName(dir, image string) string {
	rel, err := filepath.Rel(dir, image)
	if err != nil {
		rel = filepath.Base(image)
	}
	return filepath.ToSlash(strings.TrimSuffix(rel, filepath.Ext(rel)))
}

// decoded is the outcome of decoding one pair at open.
type decoded struct {
	example
	maxLabel int // largest label other than ignore, -1 if none
	err      error
}

// decodeAll decodes pairs on cfg.Workers goroutines. Without SkipBad the
// first failure stops the others and is returned (the lowest-numbered
// failure seen, so the message is stable for a single bad file).
func decodeAll(parent context.Context, cfg *Config, pairs []datalayout.Sample) ([]decoded, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(pairs))
	budget := cfg.cacheBudget()
	var used atomic.Int64
	// The cache takes whichever examples reserve first; which ones are
	// cached never changes the pixels produced, only the speed.
	reserve := func(w, h int) bool {
		need := 4 * int64(w) * int64(h)
		if used.Add(need) <= budget {
			return true
		}
		used.Add(-need)
		return false
	}
	results := make([]decoded, len(pairs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(pairs) || ctx.Err() != nil {
					return
				}
				results[i] = decodeExample(cfg, pairs[i], reserve)
				if results[i].err != nil && !cfg.SkipBad {
					cancel()
				}
			}
		})
	}
	wg.Wait()
	if !cfg.SkipBad {
		for _, r := range results {
			if r.err != nil {
				return nil, r.err
			}
		}
	}
	if err := parent.Err(); err != nil {
		return nil, fmt.Errorf("data set: opening %s interrupted: %w", cfg.source(), err)
	}
	return results, nil
}

func decodeExample(cfg *Config, p datalayout.Sample, reserve func(w, h int) bool) decoded {
	s, err := readPair(cfg, p, reserve)
	if err != nil {
		return decoded{err: err}
	}
	counts, labelled := metrics.LabelCounts(s.Labels, cfg.ignore())
	maxLabel := -1
	for l := len(counts) - 1; l >= 0; l-- {
		if counts[l] > 0 && l != cfg.ignore() {
			maxLabel = l
			break
		}
	}
	d := decoded{maxLabel: maxLabel}
	d.example = example{
		sample: p,
		width:  s.Width, height: s.Height,
		counts:   counts[:],
		labelled: labelled,
	}
	if s.RGB != nil {
		d.rgb, d.labels = s.RGB, s.Labels
	}
	return d
}
