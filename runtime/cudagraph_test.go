package runtime

import (
	"bytes"
	"testing"
)

// TestCUDAGraphSessionDoesNotFallBack: a session asked for CUDA graphs
// that the CUDA provider cannot open returns the error rather than moving
// to the CPU with the fallback line (the caller opens it again without
// graphs); on the CPU the option is the CUDA provider's and plays no part;
// WithCUDAGraph leaves the caller's options map alone.
func TestCUDAGraphSessionDoesNotFallBack(t *testing.T) {
	requireORT(t)
	base := Options{Threads: 1, CUDAOptions: map[string]string{"use_tf32": "0"}}
	g := WithCUDAGraph(base)
	if g.CUDAOptions[CUDAGraphOption] != "1" || g.CUDAOptions["use_tf32"] != "0" {
		t.Fatalf("WithCUDAGraph's provider options: %v", g.CUDAOptions)
	}
	if _, ok := base.CUDAOptions[CUDAGraphOption]; ok {
		t.Fatal("WithCUDAGraph wrote into the caller's options map")
	}
	var log bytes.Buffer
	g.Log = &log
	s, err := NewSession(addModel(t), g)
	if err != nil {
		t.Fatalf("a CPU session with the graph option: %v", err)
	}
	if s.Device != DeviceCPU {
		t.Errorf("a CPU session runs on %s", s.Device)
	}
	s.Close()
	if _, err := CUDADevices(); err == nil {
		t.Skip("CUDA is usable here: the refusal path needs a machine without it")
	}
	g.Device = DeviceCUDA
	s, err = NewSession(addModel(t), g)
	if err == nil {
		s.Close()
		t.Fatalf("a CUDA-graph session without CUDA opened on %s", s.Device)
	}
	if log.Len() != 0 {
		t.Errorf("the refused graph session printed %q", log.String())
	}
	// Without graphs the same options fall back to the CPU, with its line.
	g.CUDAOptions = base.CUDAOptions
	s, err = NewSession(addModel(t), g)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Device != DeviceCPU || !bytes.Contains(log.Bytes(), []byte("running on the CPU")) {
		t.Errorf("without graphs: device %s, log %q", s.Device, log.String())
	}
}
