package data

import (
	"fmt"
)

// produce walks the (epoch, step) sequence, queueing each batch in order
// and its examples for the workers.
func (l *Loader) produce() {
	defer l.wg.Done()
	defer close(l.pending)
	defer close(l.jobs)
	b := l.cfg.BatchSize
	for epoch := l.cfg.StartEpoch; l.cfg.Epochs == 0 || epoch < l.cfg.Epochs; epoch++ {
		order, err := l.order(epoch)
		if err != nil {
			l.send(failed(err))
			return
		}
		steps := len(order) / b
		if !l.drop && len(order)%b != 0 {
			steps++
		}
		if steps == 0 {
			l.send(failed(fmt.Errorf("loader: epoch %d has %d examples, no full batch of %d", epoch, len(order), b)))
			return
		}
		first := 0
		if epoch == l.cfg.StartEpoch {
			first = l.cfg.StartStep
			if first > steps {
				l.send(failed(fmt.Errorf("loader: start step %d is past the %d steps of epoch %d", first, steps, epoch)))
				return
			}
		}
		for step := first; step < steps; step++ {
			lo := step * b
			ids := order[lo:min(lo+b, len(order))]
			global := ids
			if l.cfg.Parts > 1 { // this rank's share; positions stay the whole batch's
				share := b / l.cfg.Parts
				lo += l.cfg.Part * share
				ids = ids[l.cfg.Part*share : (l.cfg.Part+1)*share]
			}
			p, err := l.newPending(ids)
			if err != nil {
				l.send(failed(fmt.Errorf("loader: epoch %d step %d: %w", epoch, step, err)))
				return
			}
			if l.cfg.Parts > 1 {
				p.batch.Global = append(p.batch.Global[:0], global...)
			} else {
				p.batch.Global = nil
			}
			p.batch.Epoch, p.batch.Step = epoch, step
			p.nextEpoch, p.nextStep = epoch, step+1
			if step+1 == steps {
				p.nextEpoch, p.nextStep = epoch+1, 0
			}
			if !l.send(p) {
				return
			}
			for k := range ids {
				select {
				case l.jobs <- job{p: p, slot: k, pos: lo + k}:
				case <-l.ctx.Done():
					return
				}
			}
		}
	}
}

// order returns epoch's example ids.
func (l *Loader) order(epoch int) ([]int, error) {
	n := l.ds.Len()
	if l.cfg.Order != nil {
		ids := l.cfg.Order(epoch)
		for _, id := range ids {
			if id < 0 || id >= n {
				return nil, fmt.Errorf("loader: Order(%d) returned example id %d, outside 0..%d", epoch, id, n-1)
			}
		}
		return ids, nil
	}
	if l.cfg.Augment == nil {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = i
		}
		return ids, nil
	}
	return permutation(l.cfg.Seed, epoch, n), nil
}

// newPending prepares a batch (reusing a recycled one) for ids.
func (l *Loader) newPending(ids []int) (*pending, error) {
	h, w, err := batchSize(l.ds, l.pipe, ids)
	if err != nil {
		return nil, err
	}
	var batch *Batch
	select {
	case batch = <-l.free:
	default:
		batch = &Batch{}
	}
	batch.slots(len(ids), h, w, l.cfg.Augment == nil)
	copy(batch.IDs, ids)
	p := &pending{batch: batch, errs: make([]error, len(ids)), done: make(chan struct{})}
	p.left.Store(int32(len(ids)))
	return p, nil
}

// failed is a finished pending batch carrying err.
func failed(err error) *pending {
	p := &pending{err: err, done: make(chan struct{})}
	close(p.done)
	return p
}

// send queues p for the consumer; false when the loader stops first.
func (l *Loader) send(p *pending) bool {
	select {
	case l.pending <- p:
		return true
	case <-l.ctx.Done():
		return false
	}
}

// work fills slots until the producer closes the job queue.
func (l *Loader) work() {
	defer l.wg.Done()
	var sc slotScratch
	for j := range l.jobs {
		if l.ctx.Err() == nil {
			j.p.errs[j.slot] = l.fill(j, &sc)
		}
		if j.p.left.Add(-1) == 0 {
			close(j.p.done)
		}
	}
}

// fill prepares one example into its slot. Its randomness comes only from
// (seed, epoch, position), so the result is the same on any worker.
func (l *Loader) fill(j job, sc *slotScratch) error {
	b := j.p.batch
	id := b.IDs[j.slot]
	s, err := l.ds.Load(id)
	if err != nil {
		return fmt.Errorf("loader: epoch %d step %d: %w", b.Epoch, b.Step, err)
	}
	r := newRNG(l.cfg.Seed, streamExample, b.Epoch, j.pos)
	img, mask := b.slot(j.slot)
	g, err := l.pipe.apply(s, r, img, mask, sc)
	if err != nil {
		return fmt.Errorf("loader: epoch %d step %d: example %d (%s): %w", b.Epoch, b.Step, id, l.ds.examples[id].sample.Image, err)
	}
	if b.Geometries != nil {
		b.Geometries[j.slot] = g
	}
	return nil
}
