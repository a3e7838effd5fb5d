package serve

import (
	"context"
	"errors"
	"time"

	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
)

// errQueueFull is returned when more requests wait for the model than the
// queue holds; the client gets 503 and may retry.
var errQueueFull = errors.New("the server is busy: too many requests waiting for the model")

// job is one request's prepared image waiting for inference.
type job struct {
	ctx  context.Context // the request's: a job whose request is gone is not run
	item pipeline.Prepared
	done chan result // buffered: the batcher never blocks on a client
}

// abandonedError is a request that stopped waiting for its job (its
// client left, or the write timeout passed) while the batcher still held
// it: done is closed once the batcher lets go of the job's memory.
type abandonedError struct {
	cause error
	done  <-chan struct{}
}

func (e *abandonedError) Error() string { return "abandoned: " + e.cause.Error() }

type result struct {
	out pipeline.Output
	err error
}

// batcher runs the model on batches of concurrent requests: it takes the
// first waiting job, then gathers more of the same shape for up to wait or
// until max, and runs them in one session call.
type batcher struct {
	seg   *inference.Segmenter
	queue chan *job
	max   int
	wait  time.Duration
	// observe, if set, is told each batch's size.
	observe func(n int)
	stopped chan struct{}
}

func newBatcher(seg *inference.Segmenter, max, queue int, wait time.Duration, observe func(int)) *batcher {
	b := &batcher{seg: seg, queue: make(chan *job, queue), max: max, wait: wait, observe: observe, stopped: make(chan struct{})}
	go b.loop()
	return b
}

// submit queues item and waits for its output until ctx is done; then
// it returns an *abandonedError.
func (b *batcher) submit(ctx context.Context, item pipeline.Prepared) (pipeline.Output, error) {
	j := &job{ctx: ctx, item: item, done: make(chan result, 1)}
	select {
	case b.queue <- j:
	default:
		return pipeline.Output{}, errQueueFull
	}
	select {
	case r := <-j.done:
		return r.out, r.err
	case <-ctx.Done():
		released := make(chan struct{})
		go func() {
			if r := <-j.done; r.out.Release != nil { // the batcher ran it after all
				r.out.Release()
			}
			close(released)
		}()
		return pipeline.Output{}, &abandonedError{cause: context.Cause(ctx), done: released}
	}
}

// close stops the batcher once the queue is drained; no submit may follow.
func (b *batcher) close() {
	close(b.queue)
	<-b.stopped
}

func (b *batcher) loop() {
	defer close(b.stopped)
	var waiting []*job // jobs of other shapes than the batch gathered, oldest first
	var buf []float32
	open := true
	for open || len(waiting) > 0 {
		if len(waiting) == 0 {
			j, ok := <-b.queue
			if !ok {
				return
			}
			waiting = append(waiting, j)
		}
		// The oldest job's shape makes the batch, with the waiting jobs of
		// that shape and those that arrive within b.wait.
		shape := waiting[0].item.Shape
		var batch []*job
		rest := waiting[:0:0]
		for _, j := range waiting {
			if j.item.Shape == shape && len(batch) < b.max {
				batch = append(batch, j)
			} else {
				rest = append(rest, j)
			}
		}
		waiting = rest
		if open && len(batch) < b.max {
			timer := time.NewTimer(b.wait)
		gather:
			for len(batch) < b.max {
				select {
				case j, ok := <-b.queue:
					if !ok {
						open = false
						break gather
					}
					if j.item.Shape == shape {
						batch = append(batch, j)
					} else {
						waiting = append(waiting, j)
					}
				case <-timer.C:
					break gather
				}
			}
			timer.Stop()
		}
		buf = b.run(batch, buf)
	}
}

// run infers batch, reusing buf for the stacked inputs, and answers each
// job. A failed batch is retried image by image, so that one image's
// failure (say, non-finite scores) is its request's alone.
func (b *batcher) run(batch []*job, buf []float32) []float32 {
	live := batch[:0]
	for _, j := range batch {
		if err := context.Cause(j.ctx); err != nil { // no one waits for its answer
			b.seg.Recycle(j.item.Input)
			j.done <- result{err: err}
			continue
		}
		live = append(live, j)
	}
	if batch = live; len(batch) == 0 {
		return buf
	}
	if b.observe != nil {
		b.observe(len(batch))
	}
	shape := batch[0].item.Shape
	in := batch[0].item.Input
	if len(batch) > 1 {
		buf = buf[:0]
		for _, j := range batch {
			buf = append(buf, j.item.Input...)
		}
		in = buf
	}
	outs, err := b.seg.Infer(in, len(batch), shape)
	if err != nil && len(batch) > 1 {
		for _, j := range batch {
			buf = b.run([]*job{j}, buf)
		}
		return buf
	}
	for i, j := range batch {
		r := result{err: err}
		if err == nil {
			r.out = outs[i]
		}
		b.seg.Recycle(j.item.Input)
		j.done <- r
	}
	return buf
}
