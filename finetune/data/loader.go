package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/segtune/segtune/imageio"
)

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("loader closed")

// LoaderConfig configures a Loader.
type LoaderConfig struct {
	// BatchSize is the number of examples per batch (> 0).
	BatchSize int
	// Preprocess gives the normalisation (mean/std or value scale and
	// offset, channel order, layout). In evaluation it also gives the
	// geometry: resize none keeps the native size, stretch/letterbox/scale
	// resize (masks follow by nearest neighbour, borders ignored).
	Preprocess imageio.Preprocess
	// Augment, when set, selects training: a shuffled order and random
	// scale, crop and flip. Nil selects evaluation: examples in id order,
	// no randomness.
	Augment *Augment
	// Seed, with the epoch, determines the order and every augmentation.
	Seed uint64
	// LastBatch says whether a partial last batch is dropped or kept.
	LastBatch LastBatch
	// Order, when set, returns the example ids of an epoch in the order to
	// use (ids may repeat or be left out), replacing the default order; it
	// is how a sampler balances examples. It runs on the loader's
	// goroutine, once per epoch, and must depend only on epoch for runs to
	// be reproducible and resumable.
	Order func(epoch int) []int
	// StartEpoch and StartStep are where to begin: a previous run's
	// Loader.Position to resume, or 0, 0.
	StartEpoch, StartStep int
	// Epochs ends the stream before epoch Epochs (Next then returns
	// io.EOF); 0 runs until Close. Evaluation usually wants 1.
	Epochs int
	// Workers prepare examples in parallel; 0 means GOMAXPROCS.
	Workers int
	// Prefetch is how many batches may be queued ahead of the consumer;
	// 0 picks enough to keep the workers busy.
	Prefetch int
	// Parts > 1 splits every batch into that many equal, consecutive parts
	// (BatchSize must be a multiple) and loads only part Part: the share of
	// one rank of a data-parallel run, each rank's loader drawing the same
	// batches. Every example keeps the randomness of its position in the
	// whole batch, so the parts together are exactly the unsplit batch.
	// Batch.IDs then hold the part's examples and Batch.Global the whole
	// batch's. Only for loaders that drop a partial last batch.
	Parts, Part int
}

// Loader produces batches ahead of the consumer. Next must be called from
// one goroutine at a time; Close may be called from any.
type Loader struct {
	ds      *Dataset
	cfg     LoaderConfig
	pipe    *pipeline
	drop    bool
	ctx     context.Context
	cancel  context.CancelFunc
	pending chan *pending // batches in stream order
	jobs    chan job
	free    chan *Batch
	wg      sync.WaitGroup
	closed  atomic.Bool

	// Consumer state, touched only by Next and Position.
	cur         *pending
	epoch, step int
	err         error
}

// pending is a batch being filled by the workers.
type pending struct {
	batch               *Batch
	left                atomic.Int32
	errs                []error // per slot, read after done
	err                 error   // batch-level (set before done closes)
	done                chan struct{}
	nextEpoch, nextStep int
}

// job is one example to put into one slot.
type job struct {
	p    *pending
	slot int
	pos  int // position in the epoch's order, which seeds its randomness
}

// NewLoader starts a loader over ds. It stops when ctx is cancelled or
// Close is called; call Close in any case to wait for its goroutines.
func NewLoader(ctx context.Context, ds *Dataset, cfg LoaderConfig) (*Loader, error) {
	if ds == nil || ds.Len() == 0 {
		return nil, fmt.Errorf("loader: empty data set")
	}
	if cfg.BatchSize <= 0 {
		return nil, fmt.Errorf("loader: batch size %d must be positive", cfg.BatchSize)
	}
	if cfg.StartEpoch < 0 || cfg.StartStep < 0 || cfg.Epochs < 0 || cfg.Workers < 0 || cfg.Prefetch < 0 {
		return nil, fmt.Errorf("loader: negative start (%d, %d), epochs %d, workers %d or prefetch %d",
			cfg.StartEpoch, cfg.StartStep, cfg.Epochs, cfg.Workers, cfg.Prefetch)
	}
	pipe, err := newPipeline(cfg.Augment, cfg.Preprocess, ds.ignore)
	if err != nil {
		return nil, fmt.Errorf("loader: %w", err)
	}
	drop := cfg.LastBatch == LastDrop || (cfg.LastBatch == LastDefault && cfg.Augment != nil)
	if cfg.Parts > 1 && (cfg.BatchSize%cfg.Parts != 0 || cfg.Part < 0 || cfg.Part >= cfg.Parts || !drop) {
		return nil, fmt.Errorf("loader: part %d of %d of batches of %d (want 0 ≤ part < parts, parts dividing the batch, and the last partial batch dropped)",
			cfg.Part, cfg.Parts, cfg.BatchSize)
	}
	if drop && cfg.Order == nil && ds.Len() < cfg.BatchSize {
		return nil, fmt.Errorf("loader: %d examples make no full batch of %d (keep the last batch or lower the batch size)",
			ds.Len(), cfg.BatchSize)
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	prefetch := cfg.Prefetch
	if prefetch == 0 {
		prefetch = max(2, (workers+cfg.BatchSize-1)/cfg.BatchSize+1)
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &Loader{
		ds: ds, cfg: cfg, pipe: pipe, drop: drop,
		ctx: ctx, cancel: cancel,
		pending: make(chan *pending, prefetch),
		jobs:    make(chan job, cfg.BatchSize),
		free:    make(chan *Batch, prefetch+2),
		epoch:   cfg.StartEpoch, step: cfg.StartStep,
	}
	l.wg.Add(1 + workers)
	go l.produce()
	for range workers {
		go l.work()
	}
	return l, nil
}

// Next returns the next batch, io.EOF after the last epoch, ErrClosed
// after Close, or the error that stopped the stream (which every later
// call returns too). Waiting can be cut short with ctx.
func (l *Loader) Next(ctx context.Context) (*Batch, error) {
	if l.err != nil {
		return nil, l.err
	}
	if l.cur == nil {
		select {
		case p, ok := <-l.pending:
			if !ok {
				return nil, l.fail(l.endErr())
			}
			l.cur = p
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.ctx.Done():
			return nil, l.fail(l.endErr())
		}
	}
	select {
	case <-l.cur.done:
	case <-ctx.Done():
		return nil, ctx.Err() // l.cur is kept for the next call
	case <-l.ctx.Done():
		return nil, l.fail(l.endErr())
	}
	p := l.cur
	l.cur = nil
	if l.ctx.Err() != nil {
		// Workers stop filling slots once cancelled: the batch may be partial.
		return nil, l.fail(l.endErr())
	}
	if err := p.firstErr(); err != nil {
		return nil, l.fail(err)
	}
	l.epoch, l.step = p.nextEpoch, p.nextStep
	return p.batch, nil
}

// Position returns where the next batch comes from: the (epoch, step) to
// store in a checkpoint and pass back as StartEpoch and StartStep.
func (l *Loader) Position() (epoch, step int) { return l.epoch, l.step }

// Recycle hands a batch the caller no longer uses back to the loader, which
// may fill its buffers again. Optional; saves allocation.
func (l *Loader) Recycle(b *Batch) {
	if b == nil {
		return
	}
	select {
	case l.free <- b:
	default:
	}
}

// Close stops the loader and waits for its goroutines. It is safe to call
// more than once and from any goroutine.
func (l *Loader) Close() error {
	l.closed.Store(true)
	l.cancel()
	l.wg.Wait()
	return nil
}

func (l *Loader) fail(err error) error {
	l.err = err
	return err
}

// endErr tells why the stream ended without a batch error.
func (l *Loader) endErr() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.ctx.Err(); err != nil {
		return fmt.Errorf("loader: %w", context.Cause(l.ctx))
	}
	return io.EOF
}

func (p *pending) firstErr() error {
	if p.err != nil {
		return p.err
	}
	for _, err := range p.errs {
		if err != nil {
			return err
		}
	}
	return nil
}
