package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The fake model doubles each input value; Finish checks it got its own item
// back, which catches any mix-up of items across batches.
func TestRunBatchesAndReportsFailures(t *testing.T) {
	var paths []string
	for i := 0; i < 23; i++ {
		paths = append(paths, fmt.Sprintf("img%02d.png", i))
	}
	var calls, maxBatch atomic.Int64
	var mismatches atomic.Int64
	st := Stages{
		Prepare: func(path string) (Prepared, error) {
			var i int
			fmt.Sscanf(path, "img%d.png", &i)
			if i%7 == 3 {
				return Prepared{}, errors.New("corrupt")
			}
			h := 2
			if i >= 15 { // a second image size forces a flush
				h = 3
			}
			in := make([]float32, 1*h*2)
			for k := range in {
				in[k] = float32(i)
			}
			return Prepared{Input: in, Shape: Shape{1, h, 2}, Meta: i}, nil
		},
		Infer: func(batch []float32, n int, s Shape) ([]Output, error) {
			calls.Add(1)
			if int64(n) > maxBatch.Load() {
				maxBatch.Store(int64(n))
			}
			per := s[0] * s[1] * s[2]
			if len(batch) != n*per {
				return nil, fmt.Errorf("batch holds %d values, want %d", len(batch), n*per)
			}
			out := make([]Output, n)
			for i := range out {
				out[i].Data = make([]float32, per)
				for k := range out[i].Data {
					out[i].Data[k] = 2 * batch[i*per+k]
				}
			}
			return out, nil
		},
		Finish: func(path string, p Prepared, out Output) error {
			if out.Data[0] != 2*float32(p.Meta.(int)) {
				mismatches.Add(1)
			}
			if p.Meta.(int) == 20 {
				return errors.New("disk full")
			}
			return nil
		},
	}
	var lastDone int
	rep, err := Run(paths, st, Config{Batch: 4, Progress: func(d, total int) {
		if total != 23 {
			t.Errorf("progress total %d", total)
		}
		lastDone = d
	}})
	if err != nil {
		t.Fatal(err)
	}
	if mismatches.Load() != 0 {
		t.Fatalf("%d items got another item's output", mismatches.Load())
	}
	// Prepare fails for 3, 10, 17; Finish fails for 20.
	if rep.Succeeded != 19 || len(rep.Failures) != 4 {
		t.Fatalf("succeeded %d, failures %v", rep.Succeeded, rep.Failures)
	}
	if rep.Failures[0].Path != "img03.png" || !strings.Contains(rep.Failures[3].Err.Error(), "disk full") {
		t.Errorf("failures not sorted or wrong: %v", rep.Failures)
	}
	if maxBatch.Load() > 4 {
		t.Errorf("batch of %d exceeds 4", maxBatch.Load())
	}
	if lastDone != 23 {
		t.Errorf("progress ended at %d", lastDone)
	}
}

func TestRunStopsWhenModelFails(t *testing.T) {
	paths := make([]string, 50)
	for i := range paths {
		paths[i] = fmt.Sprint(i)
	}
	st := Stages{
		Prepare: func(string) (Prepared, error) { return Prepared{Input: []float32{1}, Shape: Shape{1, 1, 1}}, nil },
		Infer: func([]float32, int, Shape) ([]Output, error) {
			return nil, errors.New("out of memory")
		},
		Finish: func(string, Prepared, Output) error { return nil },
	}
	_, err := Run(paths, st, Config{Batch: 2})
	if err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("err = %v", err)
	}
}

// Defect: one failed inference aborted the whole run without naming the
// image; now the image is retried alone, named, and skipped.
func TestOneImageTheModelFailsOnIsSkipped(t *testing.T) {
	paths := make([]string, 20)
	for i := range paths {
		paths[i] = fmt.Sprint(i)
	}
	st := Stages{
		Prepare: func(p string) (Prepared, error) {
			v := float32(0)
			if p == "7" {
				v = -1 // the model fails on this one
			}
			return Prepared{Input: []float32{v}, Shape: Shape{1, 1, 1}}, nil
		},
		Infer: func(batch []float32, n int, _ Shape) ([]Output, error) {
			if slices.Contains(batch, -1) {
				return nil, errors.New("Conv: invalid input")
			}
			return make([]Output, n), nil
		},
		Finish: func(string, Prepared, Output) error { return nil },
	}
	rep, err := Run(paths, st, Config{Batch: 4})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Succeeded != 19 || len(rep.Failures) != 1 || rep.Failures[0].Path != "7" ||
		!strings.Contains(rep.Failures[0].Err.Error(), "inference failed: Conv: invalid input") {
		t.Fatalf("report = %+v", rep)
	}
}

// RunSeq takes paths from a sequence only as fast as the workers take
// them, counts ErrSkip items apart, and returns the sequence's error.
func TestRunSeqStreamsSkipsAndStopsOnListError(t *testing.T) {
	st := Stages{
		Prepare: func(path string) (Prepared, error) {
			if strings.HasPrefix(path, "done") {
				return Prepared{}, fmt.Errorf("%s: %w", path, ErrSkip)
			}
			return Prepared{Input: []float32{1}, Shape: Shape{1, 1, 1}}, nil
		},
		Infer: func(batch []float32, n int, shape Shape) ([]Output, error) {
			return make([]Output, n), nil
		},
		Finish: func(string, Prepared, Output) error { return nil },
	}
	var pulled atomic.Int64
	const n = 10000
	seq := func(yield func(string, error) bool) {
		for i := 0; i < n; i++ {
			pulled.Add(1)
			name := fmt.Sprintf("img%d", i)
			if i%4 == 0 {
				name = fmt.Sprintf("done%d", i)
			}
			if !yield(name, nil) {
				return
			}
		}
	}
	rep, err := RunSeq(seq, 0, st, Config{Batch: 2, PrepareWorkers: 1, FinishWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != n || rep.Skipped != n/4 || rep.Succeeded != n-n/4 || len(rep.Failures) != 0 {
		t.Fatalf("report %+v", rep)
	}

	// A listing that fails part-way stops the run with its error; what was
	// listed before is processed.
	boom := errors.New("listing failed")
	bad := func(yield func(string, error) bool) {
		for i := 0; i < 7; i++ {
			if !yield(fmt.Sprintf("img%d", i), nil) {
				return
			}
		}
		yield("", boom)
	}
	rep, err = RunSeq(bad, 0, st, Config{Batch: 3})
	if !errors.Is(err, boom) || rep.Succeeded != 7 || rep.Total != 7 {
		t.Fatalf("err %v, report %+v", err, rep)
	}

	// The sequence is not drained ahead of the workers: a blocked Finish
	// holds the feeder to a few batches.
	release := make(chan struct{})
	pulled.Store(0)
	slow := st
	slow.Finish = func(string, Prepared, Output) error { <-release; return nil }
	done := make(chan struct{})
	go func() {
		RunSeq(seq, 0, slow, Config{Batch: 2, PrepareWorkers: 1, FinishWorkers: 1})
		close(done)
	}()
	time.Sleep(200 * time.Millisecond)
	if p := pulled.Load(); p > 50 {
		t.Errorf("%d paths pulled while the first result was still being finished", p)
	}
	close(release)
	<-done
}

// Inference gets a batch of one as the item's own Input, and larger batches
// in one buffer reused from batch to batch: no fresh batch-sized allocation
// on the inference goroutine (its page faults took 2.5 ms a 480×360 image at
// two threads, against about 30 ms of inference).
func TestBatchesAreNotAllocatedAnew(t *testing.T) {
	for _, batch := range []int{1, 3} {
		inputs := map[*float32]bool{} // every Prepared.Input
		var mu sync.Mutex
		var stacks []*float32
		st := Stages{
			Prepare: func(path string) (Prepared, error) {
				in := []float32{1, 2, 3, 4}
				mu.Lock()
				inputs[&in[0]] = true
				mu.Unlock()
				return Prepared{Input: in, Shape: Shape{1, 2, 2}}, nil
			},
			Infer: func(b []float32, n int, _ Shape) ([]Output, error) {
				mu.Lock()
				own := inputs[&b[0]]
				mu.Unlock()
				if n == 1 && !own {
					return nil, errors.New("a batch of one was copied")
				}
				if n > 1 {
					stacks = append(stacks, &b[0])
				}
				for i := range n {
					if !slices.Equal(b[4*i:4*i+4], []float32{1, 2, 3, 4}) {
						return nil, fmt.Errorf("item %d of the batch holds %v", i, b[4*i:4*i+4])
					}
				}
				return make([]Output, n), nil
			},
			Finish: func(string, Prepared, Output) error { return nil },
		}
		paths := make([]string, 3*batch)
		for i := range paths {
			paths[i] = fmt.Sprint(i)
		}
		rep, err := Run(paths, st, Config{Batch: batch})
		if err != nil || rep.Succeeded != len(paths) {
			t.Fatalf("batch %d: %v, report %+v", batch, err, rep)
		}
		for _, p := range stacks[min(1, len(stacks)):] {
			if p != stacks[0] {
				t.Fatalf("batch %d: batches stacked in %d different buffers, want one reused", batch, len(slices.Compact(slices.Clone(stacks))))
			}
		}
		if batch > 1 && len(stacks) != 3 {
			t.Fatalf("batch %d: %d stacked batches, want 3", batch, len(stacks))
		}
	}
}

// Recycle gets every item's Input once, after inference, including items
// of a batch the model failed on (retried one by one); Finish gets none.
func TestRecycleGetsEveryInputOnce(t *testing.T) {
	var mu sync.Mutex
	made, recycled := map[*float32]int{}, map[*float32]int{}
	inferred := map[*float32]bool{}
	st := Stages{
		Prepare: func(p string) (Prepared, error) {
			in := []float32{0}
			if p == "5" {
				in[0] = -1 // the model fails on this one
			}
			mu.Lock()
			made[&in[0]]++
			mu.Unlock()
			return Prepared{Input: in, Shape: Shape{1, 1, 1}}, nil
		},
		Infer: func(b []float32, n int, _ Shape) ([]Output, error) {
			if slices.Contains(b, -1) {
				return nil, errors.New("invalid input")
			}
			if n == 1 {
				mu.Lock()
				inferred[&b[0]] = true
				mu.Unlock()
			}
			return make([]Output, n), nil
		},
		Finish: func(_ string, p Prepared, _ Output) error {
			if p.Input != nil {
				return errors.New("Finish got the Input")
			}
			return nil
		},
		Recycle: func(in []float32) {
			mu.Lock()
			defer mu.Unlock()
			if n, ok := made[&in[0]]; !ok || n != 1 {
				t.Errorf("recycled an Input Prepare did not make")
			}
			recycled[&in[0]]++
		},
	}
	paths := make([]string, 12)
	for i := range paths {
		paths[i] = fmt.Sprint(i)
	}
	rep, err := Run(paths, st, Config{Batch: 4})
	if err != nil || rep.Succeeded != 11 || len(rep.Failures) != 1 {
		t.Fatalf("%v, report %+v", err, rep)
	}
	if len(recycled) != len(made) {
		t.Fatalf("%d Inputs recycled of %d made", len(recycled), len(made))
	}
	for _, n := range recycled {
		if n != 1 {
			t.Fatalf("an Input recycled %d times", n)
		}
	}
	// The failed batch is retried image by image on the items' own
	// Inputs, not yet recycled: three succeed alone.
	if len(inferred) != 3 {
		t.Fatalf("%d items inferred alone, want 3 of the failed batch", len(inferred))
	}
}

// InferItems replaces Infer: it gets each batch's items themselves, Meta
// included and Input nil where Prepare made none, and Finish gets each
// item's own Output.Meta back.
func TestInferItemsGetsTheItems(t *testing.T) {
	var paths []string
	for i := 0; i < 7; i++ {
		paths = append(paths, fmt.Sprintf("img%d", i))
	}
	var batches atomic.Int32
	st := Stages{
		Prepare: func(path string) (Prepared, error) {
			return Prepared{Shape: Shape{3, 2, 2}, Meta: path}, nil
		},
		Infer: func([]float32, int, Shape) ([]Output, error) { return nil, errors.New("Infer called") },
		InferItems: func(items []Prepared) ([]Output, error) {
			batches.Add(1)
			outs := make([]Output, len(items))
			for i, p := range items {
				if p.Input != nil {
					return nil, fmt.Errorf("item %v has an input", p.Meta)
				}
				outs[i] = Output{Meta: "out-" + p.Meta.(string)}
			}
			return outs, nil
		},
		Finish: func(path string, p Prepared, out Output) error {
			if out.Meta != "out-"+path || p.Meta != path {
				return fmt.Errorf("%s got %v, %v", path, p.Meta, out.Meta)
			}
			return nil
		},
	}
	rep, err := Run(paths, st, Config{Batch: 3})
	if err != nil || rep.Succeeded != len(paths) || len(rep.Failures) > 0 {
		t.Fatalf("%v %+v", err, rep)
	}
	if n := batches.Load(); n < 3 || n > 7 {
		t.Errorf("%d batches of at most 3 for 7 items", n)
	}
}

func TestFailureRecords(t *testing.T) {
	got := FailureRecords([]Failure{{Path: "a.png", Err: errors.New("bad PNG")}, {Path: "b.jpg", Err: fmt.Errorf("decode: %w", ErrSkip)}})
	want := []FailureRecord{{Path: "a.png", Error: "bad PNG"}, {Path: "b.jpg", Error: "decode: already done"}}
	if !slices.Equal(got, want) {
		t.Errorf("records %v; want %v", got, want)
	}
	if got := FailureRecords(nil); got == nil || len(got) != 0 {
		t.Errorf("records of no failures: %#v; want an empty list", got)
	}
}

// TestTwoBatchesInFlight: with InFlight 2 two Infer calls run at once (the
// fake model waits, up to a bound, for a second one to come in), never
// more, every item gets its own output (each batch stacks into a buffer of
// its own) and a failing image is still retried alone and named; with
// InFlight 1 the calls never overlap.
func TestTwoBatchesInFlight(t *testing.T) {
	var paths []string
	for i := 0; i < 24; i++ {
		paths = append(paths, fmt.Sprintf("img%02d.png", i))
	}
	for _, inFlight := range []int{1, 2} {
		var running, most, mismatches atomic.Int64
		st := Stages{
			Prepare: func(path string) (Prepared, error) {
				var i int
				fmt.Sscanf(path, "img%d.png", &i)
				in := []float32{float32(i), float32(i)}
				return Prepared{Input: in, Shape: Shape{1, 1, 2}, Meta: i}, nil
			},
			Infer: func(batch []float32, n int, s Shape) ([]Output, error) {
				now := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				// Wait (boundedly) for the other batch, so that the two
				// overlap if the pipeline lets them.
				for deadline := time.Now().Add(200 * time.Millisecond); running.Load() < 2 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
				out := make([]Output, n)
				for i := range out {
					if batch[2*i] == 13 {
						return nil, errors.New("the model cannot take image 13")
					}
					out[i].Data = []float32{2 * batch[2*i], 2 * batch[2*i+1]}
				}
				return out, nil
			},
			Finish: func(path string, p Prepared, out Output) error {
				if out.Data[0] != 2*float32(p.Meta.(int)) || out.Data[1] != out.Data[0] {
					mismatches.Add(1)
				}
				return nil
			},
		}
		rep, err := Run(paths, st, Config{Batch: 3, InFlight: inFlight})
		if err != nil {
			t.Fatal(err)
		}
		if mismatches.Load() != 0 {
			t.Errorf("in flight %d: %d items got another item's output", inFlight, mismatches.Load())
		}
		if rep.Succeeded != 23 || len(rep.Failures) != 1 || rep.Failures[0].Path != "img13.png" {
			t.Errorf("in flight %d: succeeded %d, failures %v; want 23 and img13.png", inFlight, rep.Succeeded, rep.Failures)
		}
		if most.Load() != int64(inFlight) {
			t.Errorf("in flight %d: at most %d Infer calls ran at once", inFlight, most.Load())
		}
	}
}

// While a batch runs, no more than Config.ahead() items are prepared
// ahead of it (each is a whole input tensor: on a 1024² model the old
// two batches plus one per worker held five 12 MiB tensors at batch 1),
// and yet the whole next batch is, so that preparing overlaps the run.
func TestPreparedAheadIsBounded(t *testing.T) {
	for _, c := range []struct {
		cfg Config
		// held: items in the running batches, and with more than one in
		// flight, the batch gathered and waiting for a run to end.
		held, ahead int
	}{
		{Config{Batch: 1, PrepareWorkers: 2}, 1, 2},
		{Config{Batch: 1, PrepareWorkers: 4}, 1, 4},
		{Config{Batch: 3, PrepareWorkers: 1}, 3, 3},
		{Config{Batch: 2, PrepareWorkers: 1, InFlight: 2}, 2*2 + 2, 2},
	} {
		var paths []string
		for i := range 40 {
			paths = append(paths, fmt.Sprint(i))
		}
		var prepared atomic.Int64
		release := make(chan struct{})
		var once sync.Once
		st := Stages{
			Prepare: func(string) (Prepared, error) {
				prepared.Add(1)
				return Prepared{Input: []float32{1}, Shape: Shape{1, 1, 1}}, nil
			},
			Infer: func(_ []float32, n int, _ Shape) ([]Output, error) {
				<-release // every batch waits until the count is read
				return make([]Output, n), nil
			},
			Finish: func(string, Prepared, Output) error { return nil },
		}
		done := make(chan struct{})
		go func() {
			Run(paths, st, c.cfg)
			close(done)
		}()
		want := int64(c.held + c.ahead)
		deadline := time.Now().Add(10 * time.Second)
		for prepared.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond) // room for any more to be prepared
		if got := prepared.Load(); got != want {
			t.Errorf("%+v: %d items prepared while the first batches ran, want %d (%d held, %d ahead)", c.cfg, got, want, c.held, c.ahead)
		}
		once.Do(func() { close(release) })
		<-done
	}
}

// Release is called once for each output, after its Finish returned.
func TestOutputsAreReleasedAfterFinish(t *testing.T) {
	var paths []string
	for i := range 9 {
		paths = append(paths, fmt.Sprint(i))
	}
	var released sync.Map // item → *atomic.Int32
	var early atomic.Int32
	st := Stages{
		Prepare: func(p string) (Prepared, error) {
			var i int
			fmt.Sscan(p, &i)
			return Prepared{Input: []float32{float32(i)}, Shape: Shape{1, 1, 1}, Meta: i}, nil
		},
		Infer: func(b []float32, n int, _ Shape) ([]Output, error) {
			out := make([]Output, n)
			for i := range out {
				count := new(atomic.Int32)
				released.Store(int(b[i]), count)
				out[i] = Output{Data: []float32{b[i]}, Release: func() { count.Add(1) }}
			}
			return out, nil
		},
		Finish: func(_ string, p Prepared, _ Output) error {
			if v, _ := released.Load(p.Meta.(int)); v.(*atomic.Int32).Load() != 0 {
				early.Add(1)
			}
			if p.Meta.(int) == 4 {
				return errors.New("disk full") // released all the same
			}
			return nil
		},
	}
	rep, err := Run(paths, st, Config{Batch: 2})
	if err != nil || len(rep.Failures) != 1 {
		t.Fatal(err, rep.Failures)
	}
	if early.Load() != 0 {
		t.Errorf("%d outputs released before their Finish", early.Load())
	}
	for i := range 9 {
		n := int32(-1) // never run
		if v, ok := released.Load(i); ok {
			n = v.(*atomic.Int32).Load()
		}
		if n != 1 {
			t.Errorf("item %d: output released %d times, want once", i, n)
		}
	}
}
