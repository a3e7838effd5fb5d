package serve

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func flagName(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }

// syncBuffer is notes written by a server's goroutine and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// fixedBatchOne opens a 1×1 convolution of two classes on 8×8 images in
// batches of exactly 1.
func fixedBatchOne(t *testing.T) *inference.Segmenter {
	t.Helper()
	runtimetest.Require(t)
	b := &onnx.Builder{}
	wt := b.Initializer(onnx.NewFloat32Tensor("w", []int64{2, 3, 1, 1}, []float32{0, 0, 0, 1, -1, 0}))
	b.Emit("Conv", "conv", []string{"input", wt}, []string{"logits"})
	m := onnx.NewModel(b.Graph("conv",
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("input", onnx.Float32, 1, 3, 8, 8)},
		[]*onnx.ValueInfoProto{onnx.TensorValueInfo("logits", onnx.Float32, 1, 2, 8, 8)}), 17)
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := inference.Open(data, ct, imageio.Preprocess{Height: 8, Width: 8}, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	seg.Name = "conv.onnx"
	return seg
}

// A request's options and address are checked before any work, by key.
func TestRequestCheck(t *testing.T) {
	r := Request{Options: DefaultOptions(), Addr: DefaultAddr}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	r.MaxBatch = 0
	if err := r.Check(); err == nil || setting.Rename(err, flagName).Error() != "--max-batch must be at least 1" {
		t.Errorf("max batch 0: %v", err)
	}
	r = Request{Options: DefaultOptions(), Addr: "8080"}
	if err := r.Check(); err == nil || !strings.HasPrefix(setting.Rename(err, flagName).Error(), `--addr "8080" is not host:port`) {
		t.Errorf("addr 8080: %v", err)
	}
}

// Run refuses a palette it cannot read and an address it cannot listen
// on before it opens the model; it serves with its batch capped at the
// model's fixed batch size (noted) until its context ends.
func TestRequestRun(t *testing.T) {
	opened := 0
	open := func() (*inference.Segmenter, error) { opened++; return nil, errors.New("not reached") }
	r := Request{Options: DefaultOptions(), Addr: "127.0.0.1:0", Palette: filepath.Join(t.TempDir(), "absent.png"), Name: flagName}
	if err := r.Run(context.Background(), imageio.Sidecar{}, open); err == nil || !strings.Contains(err.Error(), "absent.png") || opened != 0 {
		t.Errorf("a missing palette: %v (model opened %d times)", err, opened)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	r = Request{Options: DefaultOptions(), Addr: busy.Addr().String(), Name: flagName}
	if err := r.Run(context.Background(), imageio.Sidecar{}, open); err == nil || !strings.HasPrefix(setting.Rename(err, flagName).Error(), "--addr: listen tcp") || opened != 0 {
		t.Errorf("a busy address: %v (model opened %d times)", setting.Rename(err, flagName), opened)
	}

	seg := fixedBatchOne(t)
	var notes syncBuffer
	r = Request{Options: DefaultOptions(), Addr: "127.0.0.1:0", Notes: &notes, Name: flagName}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx, imageio.Sidecar{}, func() (*inference.Segmenter, error) { return seg, nil })
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(notes.String(), "serving"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no serving notice: %q", notes.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^segtune: the model's batch size is fixed at 1; using --batch 1\n` +
		`segtune: serving conv\.onnx on http://127\.0\.0\.1:\d+ \(cpu\)\nsegtune: stopped\n$`)
	if !want.MatchString(notes.String()) {
		t.Errorf("notes %q", notes.String())
	}
}
