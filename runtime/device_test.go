package runtime

import (
	"errors"
	"strings"
	"testing"
)

// TestBindingRunsOnDeviceTensors binds y = x + c's input and output to two
// views of one buffer, runs twice (the second run reading the first's
// output, as a training loop feeds its updated weights back), and reads the
// result back.
func TestBindingRunsOnDeviceTensors(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mem, err := s.InputMemory("x")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if mem.GPU {
		t.Fatal("a CPU session's input memory is reported as device memory")
	}
	buf, err := mem.Alloc(2 * 256)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	a, err := buf.Tensor(Float32, 0, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := buf.Tensor(Float32, 256, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if err := a.Upload([]float32{10, 20, 30, 40, 50, 60}); err != nil {
		t.Fatal(err)
	}
	ab, err := s.NewBinding()
	if err != nil {
		t.Fatal(err)
	}
	defer ab.Close()
	ba, err := s.NewBinding()
	if err != nil {
		t.Fatal(err)
	}
	defer ba.Close()
	for _, e := range []error{ab.Input("x", a), ab.Output("y", b), ba.Input("x", b), ba.Output("y", a)} {
		if e != nil {
			t.Fatal(e)
		}
	}
	if err := ab.Run(); err != nil {
		t.Fatal(err)
	}
	if err := ba.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 6)
	if err := a.Download(got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if want := float32(10*(i+1) + 2*(i+1)); v != want {
			t.Errorf("y[%d] after two runs = %v, want %v", i, v, want)
		}
	}
	mid := make([]float32, 6)
	if err := b.Download(mid); err != nil {
		t.Fatal(err)
	}
	if mid[5] != 66 {
		t.Errorf("first run's output [5] = %v, want 66", mid[5])
	}
}

func TestDeviceTensorRejectsMisuse(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.InputMemory("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("InputMemory of a missing input: %v", err)
	}
	mem, err := s.InputMemory("x")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	buf, err := mem.Alloc(24)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	if _, err := buf.Tensor(Float32, 4, []int64{2, 3}); err == nil {
		t.Error("a view past the buffer's end was made")
	}
	if _, err := buf.Tensor(Float32, 0, []int64{-1, 3}); err == nil {
		t.Error("a view of negative shape was made")
	}
	d, err := buf.Tensor(Float32, 0, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if err := d.Upload(make([]float32, 5)); err == nil {
		t.Error("uploading 5 values into 6 was accepted")
	}
	if err := d.Upload(make([]int64, 6)); err == nil {
		t.Error("uploading int64 into float32 was accepted")
	}
	bd, err := s.NewBinding()
	if err != nil {
		t.Fatal(err)
	}
	defer bd.Close()
	if err := bd.Input("y", d); err == nil {
		t.Error("binding an output name as input was accepted")
	}
	if err := bd.Output("x", d); err == nil {
		t.Error("binding an input name as output was accepted")
	}
	if _, err := mem.Alloc(0); err == nil {
		t.Error("a 0-byte allocation was accepted")
	}
}

// TestBindingPassesRunOptions: a binding's run-option config entries reach
// ONNX Runtime's RunWithBinding. An arena-shrinkage entry that names no
// device is refused by the run itself, so the run fails with it and
// succeeds without it; gpu_graph_id (which the CPU provider ignores) is
// kept beside it and read back.
func TestBindingPassesRunOptions(t *testing.T) {
	requireORT(t)
	s, err := NewSession(addModel(t), Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mem, err := s.InputMemory("x")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	x, err := mem.NewTensor(Float32, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Free()
	y, err := mem.NewTensor(Float32, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Free()
	run := func(entries ...string) error {
		bd, err := s.NewBinding()
		if err != nil {
			t.Fatal(err)
		}
		defer bd.Close()
		if err := errors.Join(bd.Input("x", x), bd.Output("y", y)); err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(entries); i += 2 {
			if err := bd.SetRunConfig(entries[i], entries[i+1]); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i+1 < len(entries); i += 2 {
			if v, ok := bd.RunConfig(entries[i]); !ok || v != entries[i+1] {
				t.Errorf("run option %s reads back %q, %v; want %q", entries[i], v, ok, entries[i+1])
			}
		}
		if _, ok := bd.RunConfig("no.such.entry"); ok {
			t.Error("an entry never set reads back")
		}
		return bd.Run()
	}
	if err := run("gpu_graph_id", "1"); err != nil {
		t.Fatalf("run with gpu_graph_id on the CPU: %v", err)
	}
	if err := run("gpu_graph_id", "2", "memory.enable_memory_arena_shrinkage", "nowhere:7"); err == nil {
		t.Error("a run whose options name no device's arena to shrink succeeded: the run options did not reach the run")
	}
}
