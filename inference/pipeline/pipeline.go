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
	// Release, if set, is called once Finish is done with the output:
	// Data's memory goes back to Infer for a later batch.
	Release func()
}

// Config tunes the pipeline.
type Config struct {
	Batch          int // items per Infer call, at least 1
	PrepareWorkers int // default GOMAXPROCS
	FinishWorkers  int // default GOMAXPROCS
	// InFlight is how many Infer calls may run at once (default 1): 2 on
	// a GPU, so that one batch's copies to and from the device and its
	// checks on the host overlap the other's kernels. On the CPU one run
	// already takes every core. Infer must then be safe for concurrent
	// use (an ONNX Runtime session is).
	InFlight int
	// Progress, if set, is called after each finished or failed item, from
	// one goroutine at a time.
	Progress func(done, total int)
}

// Failure names a file that could not be processed.
type Failure struct {
	Path string
	Err  error
}

// FailureRecord is a Failure as text, as reports print it and JSON
// holds it.
type FailureRecord struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// FailureRecords is fs as text, in their order; never nil, so that
// JSON holds an empty list.
func FailureRecords(fs []Failure) []FailureRecord {
	out := make([]FailureRecord, 0, len(fs))
	for _, f := range fs {
		out = append(out, FailureRecord{Path: f.Path, Error: f.Err.Error()})
	}
	return out
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

// IOWorkers is a prepare (download and decode) or finish (encode and
// upload) concurrency: more than the cores for object storage, whose
// requests wait on the network.
func IOWorkers(remote bool) int {
	n := runtime.GOMAXPROCS(0)
	if remote {
		n = max(n, 8)
	}
	return n
}

func run(paths iter.Seq2[string, error], total int, st Stages, cfg Config) (Report, error) {
	start := time.Now()
	r := newRunner(total, st, cfg)
	ready := r.startPrepare(paths)
	r.startFinish()
	r.batchAndInfer(ready)
	close(r.results)
	r.finWG.Wait()
	r.rep.Total = r.fed // settled: ready is closed after the feeder is done
	r.rep.Elapsed = time.Since(start)
	slices.SortFunc(r.rep.Failures, func(a, b Failure) int { return strings.Compare(a.Path, b.Path) })
	if r.inferErr == nil && r.listErr != nil {
		return r.rep, r.listErr
	}
	return r.rep, r.inferErr
}

// runner is one run's state: prepare workers (and the feeder of paths)
// send items to ready, the batch loop on the calling goroutine runs the
// model and sends outputs to results, and finish workers consume them.
type runner struct {
	st    Stages
	cfg   Config
	total int

	mu   sync.Mutex // guards rep and done
	rep  Report
	done int

	stop    chan struct{} // closed when the run stops early
	results chan finished
	finWG   sync.WaitGroup
	// fed and listErr are settled once ready is closed.
	fed     int
	listErr error

	// The batch loop's own state.
	pending []prepared
	// slots holds cfg.InFlight stacking buffers: a batch takes one to run
	// and gives it back when done, so that no more than InFlight batches
	// run at once. Items are stacked into a slot's buffer, kept from
	// batch to batch; a batch of one is passed as it is. A fresh buffer a
	// batch, 2 MB of new pages faulted in on the inference goroutine, took
	// 2.5 ms a 480×360 image at two threads, against about 30 ms of
	// inference (bench/segment).
	slots    chan *[]float32
	inflight sync.WaitGroup
	// inferMu guards the state the running batches share: inferErr,
	// inferOK, failedRuns and rep.InferElapsed.
	inferMu  sync.Mutex
	inferErr error
	// A failed model run is retried image by image, so that one image the
	// model cannot take is reported by name and skipped like an
	// undecodable one; only a model that has failed on every image tried
	// (maxFirstFailures of them, before any success) stops the run.
	inferOK    bool
	failedRuns []string
}

func newRunner(total int, st Stages, cfg Config) *runner {
	if cfg.Batch < 1 {
		cfg.Batch = 1
	}
	if cfg.PrepareWorkers < 1 {
		cfg.PrepareWorkers = runtime.GOMAXPROCS(0)
	}
	if cfg.FinishWorkers < 1 {
		cfg.FinishWorkers = runtime.GOMAXPROCS(0)
	}
	cfg.InFlight = max(cfg.InFlight, 1)
	r := &runner{st: st, cfg: cfg, total: total, stop: make(chan struct{}),
		results: make(chan finished, 2*cfg.Batch), failedRuns: []string{}, slots: make(chan *[]float32, cfg.InFlight)}
	for range cfg.InFlight {
		r.slots <- new([]float32)
	}
	return r
}

// record counts one item's outcome and reports progress.
func (r *runner) record(path string, err error) {
	r.mu.Lock()
	switch {
	case errors.Is(err, ErrSkip):
		r.rep.Skipped++
	case err != nil:
		r.rep.Failures = append(r.rep.Failures, Failure{Path: path, Err: err})
	default:
		r.rep.Succeeded++
	}
	r.done++
	// Called under the lock so that Progress needs no locking of its own.
	if r.cfg.Progress != nil {
		r.cfg.Progress(r.done, r.total)
	}
	r.mu.Unlock()
}

// ahead is how many prepared items may wait for the batch loop (in the
// ready channel, or held by a prepare worker that cannot hand its item
// over): one batch, so that the next batch is prepared while one runs, or
// one item a worker if there are more workers. Each is a whole input
// tensor (12 MiB for a 1024² image): two batches queued besides the
// workers' held five such tensors at batch 1 on two cores.
func (c Config) ahead() int {
	return max(c.Batch, c.PrepareWorkers)
}

// startPrepare starts the prepare workers, in parallel, and the feeder of
// paths; the ready channel and the workers hold at most cfg.ahead()
// prepared items.
func (r *runner) startPrepare(paths iter.Seq2[string, error]) <-chan prepared {
	type job struct {
		index int
		path  string
	}
	jobs := make(chan job)
	ready := make(chan prepared, r.cfg.ahead()-r.cfg.PrepareWorkers)
	var prepWG sync.WaitGroup
	for w := 0; w < r.cfg.PrepareWorkers; w++ {
		prepWG.Add(1)
		go func() {
			defer prepWG.Done()
			for j := range jobs {
				p, err := r.st.Prepare(j.path)
				if err != nil {
					r.record(j.path, err)
					continue
				}
				select {
				case ready <- prepared{index: j.index, path: j.path, Prepared: p}:
				case <-r.stop:
					return
				}
			}
		}()
	}
	// The feeder reads the sequence (and so a streamed listing) only as
	// fast as the prepare workers take items.
	fedDone := make(chan struct{})
	go func() {
		defer close(fedDone)
		defer close(jobs)
		i := 0
		defer func() { r.fed = i }()
		for p, err := range paths {
			if err != nil {
				r.listErr = err
				return
			}
			select {
			case jobs <- job{i, p}:
				i++
			case <-r.stop:
				return
			}
		}
	}()
	// Workers leave early when the run stops; ready is closed only once
	// the feeder is done too, so that fed and listErr are settled.
	go func() { prepWG.Wait(); <-fedDone; close(ready) }()
	return ready
}

// startFinish starts the finish workers, in parallel.
func (r *runner) startFinish() {
	for w := 0; w < r.cfg.FinishWorkers; w++ {
		r.finWG.Add(1)
		go func() {
			defer r.finWG.Done()
			for f := range r.results {
				err := r.st.Finish(f.path, f.Prepared, f.output)
				if f.output.Release != nil {
					f.output.Release()
				}
				r.record(f.path, err)
			}
		}()
	}
}

// batchAndInfer gathers prepared items into batches and runs the model on
// them, on the calling goroutine, until ready is closed. Items of another
// shape than the pending batch flush it first.
func (r *runner) batchAndInfer(ready <-chan prepared) {
	checked := map[Shape]bool{}
	for p := range ready {
		if r.failed() {
			continue // drain
		}
		if len(r.pending) > 0 && r.pending[0].Shape != p.Shape {
			r.flush()
		}
		if !checked[p.Shape] {
			checked[p.Shape] = true
			if err := checkMemory(r.st, r.cfg, p.Shape); err != nil {
				r.inferMu.Lock()
				r.stopWith(err)
				r.inferMu.Unlock()
				continue
			}
		}
		r.pending = append(r.pending, p)
		if len(r.pending) == r.cfg.Batch {
			r.flush()
		}
	}
	r.flush()
	r.inflight.Wait()
}

// failed reports whether the run has stopped on a model or memory failure.
func (r *runner) failed() bool {
	r.inferMu.Lock()
	defer r.inferMu.Unlock()
	return r.inferErr != nil
}

// stopWith stops the run with err, the first time only; under inferMu.
func (r *runner) stopWith(err error) {
	if r.inferErr == nil {
		r.inferErr = err
		close(r.stop)
	}
}

// flush hands the pending batch to runBatch, waiting for a slot while
// InFlight batches run; with one slot the batch has run when flush
// returns.
func (r *runner) flush() {
	if len(r.pending) == 0 || r.failed() {
		r.pending = r.pending[:0]
		return
	}
	// Sorting by index keeps runs reproducible whatever order the
	// prepare workers finished in.
	slices.SortFunc(r.pending, func(a, b prepared) int { return a.index - b.index })
	slot := <-r.slots
	if r.cfg.InFlight == 1 {
		r.runBatch(r.pending, slot)
		r.pending = r.pending[:0]
		return
	}
	items := slices.Clone(r.pending)
	r.pending = r.pending[:0]
	r.inflight.Add(1)
	go func() {
		defer r.inflight.Done()
		r.runBatch(items, slot)
	}()
}

// runBatch runs the model on items, retrying image by image when the
// batch fails, recycles their inputs and gives slot back.
func (r *runner) runBatch(items []prepared, slot *[]float32) {
	defer func() { r.slots <- slot }()
	err := r.infer(items, slot)
	if err != nil && len(items) > 1 {
		for _, p := range items { // find the image(s) the model fails on
			if r.failed() {
				break
			}
			if err := r.infer([]prepared{p}, slot); err != nil {
				r.inferFailed(p, err)
			}
		}
	} else if err != nil {
		r.inferFailed(items[0], err)
	}
	if r.st.Recycle != nil {
		for _, p := range items {
			r.st.Recycle(p.Input)
		}
	}
}

// infer runs the model once on items, stacked into the slot's buffer, and
// sends their outputs to the finish workers.
func (r *runner) infer(items []prepared, stack *[]float32) error {
	shape, batch := items[0].Shape, items[0].Input
	if len(items) > 1 && r.st.InferItems == nil {
		per := shape[0] * shape[1] * shape[2]
		*stack = slices.Grow((*stack)[:0], len(items)*per)[:len(items)*per]
		for i, p := range items {
			copy((*stack)[i*per:], p.Input)
		}
		batch = *stack
	}
	t0 := time.Now()
	var outs []Output
	var err error
	if r.st.InferItems != nil {
		own := make([]Prepared, len(items))
		for i, p := range items {
			own[i] = p.Prepared
		}
		outs, err = r.st.InferItems(own)
	} else {
		outs, err = r.st.Infer(batch, len(items), shape)
	}
	r.inferMu.Lock()
	r.rep.InferElapsed += time.Since(t0) // summed over the batches in flight
	if err == nil && len(outs) != len(items) {
		err = fmt.Errorf("model returned %d outputs for a batch of %d", len(outs), len(items))
	}
	if err == nil {
		r.inferOK = true
	}
	r.inferMu.Unlock()
	if err != nil {
		return err
	}
	for i, p := range items {
		p.Input = nil // recycled once the batch is done (flush)
		r.results <- finished{prepared: p, output: outs[i]}
	}
	return nil
}

// FixBatches is the advice on batches over the memory limit
// (memlimit.TooLargeError's Fix).
const FixBatches = "lower {batch}, or {size}/{scale}"

// checkMemory estimates what batches of shape take, the pipeline's own
// buffers (a batch being gathered, the batches in flight, the items
// prepared ahead) included, and refuses them over the memory limit.
func checkMemory(st Stages, cfg Config, shape Shape) error {
	per := memlimit.Product(int64(shape[0]), int64(shape[1]), int64(shape[2]), 4)
	inFlight := max(cfg.InFlight, 1)
	total := memlimit.Product(int64((1+inFlight)*cfg.Batch+cfg.ahead()), per)
	if st.Estimate != nil {
		total = satAdd(total, memlimit.Product(int64(inFlight), st.Estimate(cfg.Batch, shape)))
	}
	what := fmt.Sprintf("batches of %d %dx%d (HxW) inputs", cfg.Batch, shape[1], shape[2])
	return memlimit.Check(what, total, FixBatches)
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
// maxFirstFailures images, it stops the run with the model's failure
// instead.
func (r *runner) inferFailed(p prepared, err error) {
	r.inferMu.Lock()
	if !r.inferOK {
		r.failedRuns = append(r.failedRuns, p.path)
		if len(r.failedRuns) >= maxFirstFailures {
			r.stopWith(fmt.Errorf("the model failed on every image tried (%s): %w", strings.Join(r.failedRuns, ", "), err))
			r.inferMu.Unlock()
			return
		}
	}
	r.inferMu.Unlock()
	r.record(p.path, fmt.Errorf("inference failed: %w", err))
}
