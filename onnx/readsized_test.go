package onnx

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// readSized reads a file in the one allocation its stat's size asks for,
// and still reads a file that changed size since the stat as it is.
func TestReadSizedOneAllocation(t *testing.T) {
	content := bytes.Repeat([]byte("onnx"), 1<<18) // 1 MiB
	var data []byte
	r := bytes.NewReader(nil)
	var before, after runtime.MemStats
	const runs = 5
	runtime.ReadMemStats(&before)
	for range runs {
		var err error
		r.Reset(content)
		if data, err = readSized(r, int64(len(content)), MaxModelBytes); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if !bytes.Equal(data, content) {
		t.Fatalf("read %d bytes, not the file's %d", len(data), len(content))
	}
	// Bytes, not allocation counts: the runtime's own small allocations
	// during a collection would count against the latter.
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	if perRun > uint64(len(content))*5/4 || cap(data) != len(content)+1 {
		t.Fatalf("%d bytes allocated a read, capacity %d, for a file of %d bytes: want one buffer of size+1", perRun, cap(data), len(content))
	}

	for _, c := range []struct {
		name       string
		file, stat int // the file's bytes now, and its size when stat'ed
	}{{"shrank", 100, 150}, {"grew", 150, 100}, {"empty", 0, 0}} {
		content := []byte(strings.Repeat("x", c.file))
		data, err := readSized(bytes.NewReader(content), int64(c.stat), 1000)
		if err != nil || !bytes.Equal(data, content) {
			t.Errorf("%s: read %d bytes (%v), want the file's %d", c.name, len(data), err, c.file)
		}
	}
	// Growing past the limit is refused, not read without end.
	if _, err := readSized(bytes.NewReader(make([]byte, 1001)), 100, 1000); !errors.Is(err, errGrew) {
		t.Fatalf("a file grown past the limit: %v", err)
	}
	if data, err := readSized(bytes.NewReader(make([]byte, 1000)), 100, 1000); err != nil || len(data) != 1000 {
		t.Fatalf("a file grown to the limit: %d bytes, %v", len(data), err)
	}
}
