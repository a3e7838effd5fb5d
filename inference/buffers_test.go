package inference

import (
	"runtime"
	"testing"
)

// A buffer put back by one goroutine is the one the next get takes on
// another, whatever P each ran on (sync.Pool keeps a Put in the putting
// P's private slot, out of other Ps' sight), and the runtime's collections
// in between do not drop it.
func TestBuffersGoBackAcrossGoroutines(t *testing.T) {
	var b buffers
	buf := b.get(1 << 10)
	for i := range 200 {
		done := make(chan struct{})
		go func(x []float32) {
			runtime.Gosched()
			b.put(x)
			close(done)
		}(buf)
		<-done
		if i%50 == 0 {
			runtime.GC()
			runtime.GC()
		}
		got := b.get(1 << 10)
		if &got[0] != &buf[0] {
			t.Fatalf("round %d: a new buffer instead of the one put back", i)
		}
		buf = got
	}
}

// get takes the most recent kept buffer large enough, passing over a
// smaller one, and no more than keptBuffers are kept.
func TestBuffersKeepTheLastFew(t *testing.T) {
	var b buffers
	small, large := make([]float32, 10), make([]float32, 100)
	b.put(large)
	b.put(small)
	if got := b.get(50); &got[0] != &large[0] || len(got) != 50 {
		t.Fatal("a smaller buffer was handed out, or the large one passed over")
	}
	if got := b.get(5); &got[0] != &small[0] {
		t.Fatal("the small buffer was not kept")
	}
	for range 5 {
		b.put(make([]float32, 10))
	}
	if len(b.kept) != keptBuffers {
		t.Fatalf("%d buffers kept, want %d", len(b.kept), keptBuffers)
	}
}
