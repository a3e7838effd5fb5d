// Package pipeline runs batched inference over many files with decoding and
// encoding overlapped with the model: prepare workers decode and preprocess
// images while the previous batch runs, and finish workers write results
// while the next batch runs, so the runtime is not left waiting on PNG codecs.
//
// A failure on one file (decoding it, or running the model on it) is
// recorded by name and the rest go on; only a model that fails on every
// image it is given stops the run.
package pipeline

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segtune/segtune/internal/memlimit"
)

// Shape is the per-item input shape (channels, height, width). Items are
// batched together only when their shapes are equal.
type Shape [3]int

// Prepared is one decoded, preprocessed input.
type Prepared struct {
	Input []float32 // len = Shape[0]*Shape[1]*Shape[2]
	Shape Shape
	// Meta travels with the item to Finish (e.g. the original image size).
	Meta any
}

// Stages are the three steps of the pipeline.
type Stages struct {
	// Prepare decodes and preprocesses the file at path.
	Prepare func(path string) (Prepared, error)
	// Infer runs the model on n items stacked into batch (n*C*H*W values) and
	// returns each item's output, in order. batch is valid during the call
	// only: it is the one item's own Input when n is 1, and otherwise a
	// buffer the pipeline reuses for the next batch.
	Infer func(batch []float32, n int, shape Shape) ([]Output, error)
	// InferItems, if set, replaces Infer for stages that need more than
	// the stacked inputs (e.g. windows read from the decoded image in
	// Meta); items' Input may then be nil.
	InferItems func(items []Prepared) ([]Output, error)
	// Finish consumes one item's output (e.g. writes a mask). Its Prepared
	// has no Input: inference is done with it.
	Finish func(path string, p Prepared, output Output) error
	// Recycle, if set, is given each item's Input once inference is done
	// with it, for a later Prepare to fill again (a pool).
	Recycle func(input []float32)
	// Estimate, if set, returns the bytes one Infer call over n items of
	// shape takes; with the pipeline's own buffers it is checked against
	// the memory limit (internal/memlimit) for every new shape, before
	// a batch of that shape is gathered.
	Estimate func(n int, shape Shape) int64
}

// Output is one item's model output.
type Output struct {
	Data  []float32
	Shape []int64 // without the batch dimension
	// Meta, if set, is Infer's own per-item result for Finish (e.g. a
	// label map already reduced from scores).
	Meta any
}

// Config tunes the pipeline.
type Config struct {
	Batch          int // items per Infer call, at least 1
	PrepareWorkers int // default GOMAXPROCS
	FinishWorkers  int // default GOMAXPROCS
	// Progress, if set, is called after each finished or failed item, from
	// one goroutine at a time.
	Progress func(done, total int)
}

// Failure names a file that could not be processed.
type Failure struct {
	Path string
	Err  error
}

// ErrSkip, returned (or wrapped) by Prepare, marks an item as already
// done (e.g. its output exists and checks out): it is counted in
// Report.Skipped, neither succeeded nor failed.
var ErrSkip = errors.New("already done")

// Report summarises a run.
type Report struct {
	Total        int
	Succeeded    int
	Skipped      int // items whose Prepare returned ErrSkip
	Failures     []Failure
	Elapsed      time.Duration
	InferElapsed time.Duration // time spent inside Infer
}

type prepared struct {
	index int
	path  string
	Prepared
}

type finished struct {
	prepared
	output Output
}

// Run processes paths through the stages. It returns an error only when
// Infer fails (the model cannot run); per-file failures are in the report.
func Run(paths []string, st Stages, cfg Config) (Report, error) {
	rep, err := run(func(yield func(string, error) bool) {
		for _, p := range paths {
			if !yield(p, nil) {
				return
			}
		}
	}, len(paths), st, cfg)
	rep.Total = len(paths) // also when a failing model stopped the run early
	return rep, err
}

// RunSeq is Run over a sequence of paths that is consumed as the pipeline
// takes them, e.g. a bucket listing streamed a page at a time: no more
// than a few batches' worth of paths are held. total, when known (> 0),
// is passed to Progress; 0 means unknown. An error from the sequence stops
// the run (items already under way finish) and is returned.
func RunSeq(paths iter.Seq2[string, error], total int, st Stages, cfg Config) (Report, error) {
	return run(paths, total, st, cfg)
}

func run(paths iter.Seq2[string, error], total int, st Stages, cfg Config) (Report, error) {
	start := time.Now()
	if cfg.Batch < 1 {
		cfg.Batch = 1
	}
	if cfg.PrepareWorkers < 1 {
		cfg.PrepareWorkers = runtime.GOMAXPROCS(0)
	}
	if cfg.FinishWorkers < 1 {
		cfg.FinishWorkers = runtime.GOMAXPROCS(0)
	}
	rep := Report{}
	var mu sync.Mutex // guards rep and done
	done := 0
	record := func(path string, err error) {
		mu.Lock()
		switch {
		case errors.Is(err, ErrSkip):
			rep.Skipped++
		case err != nil:
			rep.Failures = append(rep.Failures, Failure{Path: path, Err: err})
		default:
			rep.Succeeded++
		}
		done++
		// Called under the lock so that Progress needs no locking of its own.
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
		mu.Unlock()
	}

	// Stage 1: prepare, in parallel; a bounded channel keeps at most a couple
	// of batches decoded ahead of the model.
	type job struct {
		index int
		path  string
	}
	jobs := make(chan job)
	ready := make(chan prepared, 2*cfg.Batch)
	stop := make(chan struct{})
	var prepWG sync.WaitGroup
	for w := 0; w < cfg.PrepareWorkers; w++ {
		prepWG.Add(1)
		go func() {
			defer prepWG.Done()
			for j := range jobs {
				p, err := st.Prepare(j.path)
				if err != nil {
					record(j.path, err)
					continue
				}
				select {
				case ready <- prepared{index: j.index, path: j.path, Prepared: p}:
				case <-stop:
					return
				}
			}
		}()
	}
	// The feeder reads the sequence (and so a streamed listing) only as
	// fast as the prepare workers take items.
	var listErr error
	var fed int
	fedDone := make(chan struct{})
	go func() {
		defer close(fedDone)
		defer close(jobs)
		i := 0
		defer func() { fed = i }()
		for p, err := range paths {
			if err != nil {
				listErr = err
				return
			}
			select {
			case jobs <- job{i, p}:
				i++
			case <-stop:
				return
			}
		}
	}()
	// Workers leave early when the run stops; ready is closed only once
	// the feeder is done too, so that fed and listErr are settled.
	go func() { prepWG.Wait(); <-fedDone; close(ready) }()

	// Stage 3: finish, in parallel.
	results := make(chan finished, 2*cfg.Batch)
	var finWG sync.WaitGroup
	for w := 0; w < cfg.FinishWorkers; w++ {
		finWG.Add(1)
		go func() {
			defer finWG.Done()
			for r := range results {
				record(r.path, st.Finish(r.path, r.Prepared, r.output))
			}
		}()
	}

	// Stage 2: batch and infer, on this goroutine. Items of another shape
	// than the pending batch flush it first.
	var inferErr error
	var pending []prepared
	// A failed model run is retried image by image, so that one image the
	// model cannot take is reported by name and skipped like an
	// undecodable one; only a model that has failed on every image tried
	// (maxFirstFailures of them, before any success) stops the run.
	inferOK, failedRuns := false, []string{}
	// Items are stacked into one buffer kept from batch to batch; a batch
	// of one is passed as it is. A fresh buffer a batch, 2 MB of new pages
	// faulted in on the inference goroutine, took 2.5 ms a 480×360 image at
	// two threads, against about 30 ms of inference (bench/segment).
	var stack []float32
	run := func(items []prepared) error {
		shape, batch := items[0].Shape, items[0].Input
		if len(items) > 1 && st.InferItems == nil {
			per := shape[0] * shape[1] * shape[2]
			stack = slices.Grow(stack[:0], len(items)*per)[:len(items)*per]
			for i, p := range items {
				copy(stack[i*per:], p.Input)
			}
			batch = stack
		}
		t0 := time.Now()
		var outs []Output
		var err error
		if st.InferItems != nil {
			own := make([]Prepared, len(items))
			for i, p := range items {
				own[i] = p.Prepared
			}
			outs, err = st.InferItems(own)
		} else {
			outs, err = st.Infer(batch, len(items), shape)
		}
		rep.InferElapsed += time.Since(t0)
		if err == nil && len(outs) != len(items) {
			err = fmt.Errorf("model returned %d outputs for a batch of %d", len(outs), len(items))
		}
		if err != nil {
			return err
		}
		inferOK = true
		for i, p := range items {
			p.Input = nil // recycled once the batch is done (flush)
			results <- finished{prepared: p, output: outs[i]}
		}
		return nil
	}
	flush := func() {
		if len(pending) == 0 || inferErr != nil {
			pending = pending[:0]
			return
		}
		// Sorting by index keeps runs reproducible whatever order the
		// prepare workers finished in.
		slices.SortFunc(pending, func(a, b prepared) int { return a.index - b.index })
		err := run(pending)
		if err != nil && len(pending) > 1 {
			for _, p := range pending { // find the image(s) the model fails on
				if inferErr != nil {
					break
				}
				if err := run([]prepared{p}); err != nil {
					inferFailed(p, err, &inferErr, &failedRuns, inferOK, record, stop)
				}
			}
		} else if err != nil {
			inferFailed(pending[0], err, &inferErr, &failedRuns, inferOK, record, stop)
		}
		if st.Recycle != nil {
			for _, p := range pending {
				st.Recycle(p.Input)
			}
		}
		pending = pending[:0]
	}
	checked := map[Shape]bool{}
	for p := range ready {
		if inferErr != nil {
			continue // drain
		}
		if len(pending) > 0 && pending[0].Shape != p.Shape {
			flush()
		}
		if !checked[p.Shape] {
			checked[p.Shape] = true
			if err := checkMemory(st, cfg, p.Shape); err != nil {
				inferErr = err
				close(stop)
				continue
			}
		}
		pending = append(pending, p)
		if len(pending) == cfg.Batch {
			flush()
		}
	}
	flush()
	close(results)
	finWG.Wait()
	rep.Total = fed // settled: ready is closed after the feeder is done
	rep.Elapsed = time.Since(start)
	slices.SortFunc(rep.Failures, func(a, b Failure) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	if inferErr == nil && listErr != nil {
		return rep, listErr
	}
	return rep, inferErr
}

// checkMemory estimates what batches of shape take, the pipeline's own
// buffers (a batch being gathered, two queued, one per prepare worker)
// included, and refuses them over the memory limit.
func checkMemory(st Stages, cfg Config, shape Shape) error {
	per := memlimit.Product(int64(shape[0]), int64(shape[1]), int64(shape[2]), 4)
	total := memlimit.Product(int64(3*cfg.Batch+cfg.PrepareWorkers), per)
	if st.Estimate != nil {
		total = satAdd(total, st.Estimate(cfg.Batch, shape))
	}
	what := fmt.Sprintf("batches of %d %dx%d (HxW) inputs", cfg.Batch, shape[1], shape[2])
	return memlimit.Check(what, total, "lower --batch, or --size/--scale")
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// maxFirstFailures is how many images the model may fail on, before it
// has succeeded once, until the run stops as the model's failure.
const maxFirstFailures = 3

// inferFailed records a model failure on one image, naming it; when the
// model has not yet run successfully and has now failed on
// maxFirstFailures images, it sets *stopErr and stops the run instead.
func inferFailed(p prepared, err error, stopErr *error, failed *[]string, inferOK bool,
	record func(string, error), stop chan struct{}) {
	if !inferOK {
		*failed = append(*failed, p.path)
		if len(*failed) >= maxFirstFailures {
			*stopErr = fmt.Errorf("the model failed on every image tried (%s): %w", strings.Join(*failed, ", "), err)
			close(stop)
			return
		}
	}
	record(p.path, fmt.Errorf("inference failed: %w", err))
}
