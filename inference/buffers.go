package inference

import "sync"

// buffers is a pool of float32 buffers handed from one goroutine to
// another (a tensor from the inference loop back to a prepare worker, a
// score map from a finish worker back to the inference loop). sync.Pool
// alone missed most of the time there: a Put lands in the putting
// goroutine's P's private slot, which a Get on another P never sees, so a
// 1024² model's 12 MiB tensors and 8 MiB score maps were allocated afresh,
// their page faults interrupting ONNX Runtime's threads. The last few
// buffers put back are kept in a list every goroutine sees; older ones go
// to a sync.Pool, which the garbage collector empties.
type buffers struct {
	mu    sync.Mutex
	kept  []*[]float32 // most recent last
	spill sync.Pool
}

// keptBuffers is how many buffers the list keeps: the pipeline at batch 1
// has about two tensors and one score map out at a time. A segmenter
// holds no more than these for as long as it is open, against the
// activations ONNX Runtime's arena keeps for the session's life.
const keptBuffers = 2

// get returns a buffer of n values: a kept or pooled one whose capacity
// allows, else a new one.
func (b *buffers) get(n int) []float32 {
	b.mu.Lock()
	for i := len(b.kept) - 1; i >= 0; i-- {
		if v := b.kept[i]; cap(*v) >= n {
			b.kept = append(b.kept[:i], b.kept[i+1:]...)
			b.mu.Unlock()
			return (*v)[:n]
		}
	}
	b.mu.Unlock()
	if v, ok := b.spill.Get().(*[]float32); ok && cap(*v) >= n {
		return (*v)[:n]
	}
	return make([]float32, n)
}

// put gives buf back for a later get.
func (b *buffers) put(buf []float32) {
	if cap(buf) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.kept) == keptBuffers {
		b.spill.Put(b.kept[0])
		b.kept = append(b.kept[:0], b.kept[1:]...)
	}
	b.kept = append(b.kept, &buf)
}
