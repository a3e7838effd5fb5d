package onnx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/onnx/onnxpb"
)

// A value set on a model is read back from its file, replacing the
// entry of the same key and leaving the others; an absent key is not
// found.
func TestMetadataRoundTrip(t *testing.T) {
	m := tinyModel()
	m.Proto.MetadataProps = []*onnxpb.StringStringEntryProto{entry("author", "someone"), entry("k", "old")}
	m.SetMetadata("k", `{"a": 1}`)
	p := saveTo(t, m, "m.onnx")
	v, found, err := ReadMetadata(p, "k", 100)
	if err != nil || !found || v != `{"a": 1}` {
		t.Fatalf("k = %q, %v, %v; want the new value", v, found, err)
	}
	if v, found, err := ReadMetadata(p, "author", 100); err != nil || !found || v != "someone" {
		t.Errorf("author = %q, %v, %v; want it kept", v, found, err)
	}
	if _, found, err := ReadMetadata(p, "absent", 100); err != nil || found {
		t.Errorf("absent key: found %v, %v", found, err)
	}
	back, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(back.Proto.MetadataProps); n != 2 {
		t.Errorf("%d metadata entries; want 2", n)
	}
}

// Hostile metadata: a value over the limit or a key given twice is a
// MetadataError naming the file and the key; an oversized entry of
// another key is skipped; a truncated file and a FIFO are errors, the
// FIFO without blocking.
func TestMetadataHostile(t *testing.T) {
	huge := strings.Repeat("x", 10<<10)
	m := tinyModel()
	m.Proto.MetadataProps = []*onnxpb.StringStringEntryProto{entry("other", huge), entry("k", huge)}
	p := saveTo(t, m, "huge.onnx")
	var me *MetadataError
	for _, limit := range []int{1000, 8000} { // the entry skipped, or read whole
		if _, _, err := ReadMetadata(p, "k", limit); !errors.As(err, &me) || !strings.Contains(err.Error(), p) {
			t.Errorf("value over a limit of %d: %v; want a MetadataError naming %s", limit, err, p)
		}
	}
	if v, found, err := ReadMetadata(p, "absent", 1000); err != nil || found || v != "" {
		t.Errorf("oversized entry of another key: %q, %v, %v; want it skipped", v, found, err)
	}

	m = tinyModel()
	m.Proto.MetadataProps = []*onnxpb.StringStringEntryProto{entry("k", "1"), entry("k", "2")}
	if _, _, err := ReadMetadata(saveTo(t, m, "dup.onnx"), "k", 100); !errors.As(err, &me) {
		t.Errorf("duplicate key: %v; want a MetadataError", err)
	}

	data := marshal(t, m)
	cut := filepath.Join(t.TempDir(), "cut.onnx")
	if err := os.WriteFile(cut, data[:len(data)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadMetadata(cut, "k", 100); err == nil || !strings.Contains(err.Error(), "not a valid ONNX protobuf") {
		t.Errorf("truncated file: %v", err)
	}

	fifo := filepath.Join(t.TempDir(), "fifo.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	if _, _, err := ReadMetadata(fifo, "k", 100); !errors.Is(err, regfile.ErrNotRegular) {
		t.Errorf("FIFO: %v; want ErrNotRegular", err)
	}
}
