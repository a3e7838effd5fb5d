package models_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
)

// A known model is recognised by its content, whatever its file is called;
// one changed byte makes it unknown.
func TestRecognizeByDigest(t *testing.T) {
	dir := t.TempDir()
	copyOf := filepath.Join(dir, "renamed.onnx")
	if err := os.WriteFile(copyOf, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	e, ok, err := models.Recognize(copyOf)
	if err != nil || !ok || e.Name != models.SynthName {
		t.Fatalf("Recognize(copy of the embedded model) = %q, %v, %v", e.Name, ok, err)
	}
	changed := append([]byte(nil), models.SynthModel...)
	changed[len(changed)/2] ^= 1
	if err := os.WriteFile(copyOf, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	if e, ok, err := models.Recognize(copyOf); err != nil || ok {
		t.Fatalf("Recognize(modified copy) = %q, %v, %v; want unknown", e.Name, ok, err)
	}
	if _, _, err := models.Recognize(filepath.Join(dir, "missing.onnx")); err == nil {
		t.Error("Recognize of a missing file: no error")
	}
	for _, e := range models.Known() {
		if d := e.Digest(); len(d) != 64 || e.Size() <= 0 {
			t.Errorf("%s: digest %q, size %d; want 64 hex digits and a size", e.Name, d, e.Size())
		}
	}
}

// The digests in the registry are those of the shared assets' files.
func TestRegistryDigestsMatchSharedAssets(t *testing.T) {
	for _, e := range models.Known() {
		if e.Embedded {
			continue
		}
		path := testassets.Require(t, "models", e.File)
		got, ok, err := models.Recognize(path)
		if err != nil || !ok || got.Name != e.Name {
			t.Errorf("%s: Recognize(%s) = %q, %v, %v", e.Name, path, got.Name, ok, err)
		}
	}
}

// The digest of a model file (regfile.SHA256) reads only regular files: a FIFO is refused without blocking,
// /dev/zero (through a link) without reading it.
func TestModelDigestRefusesSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	zero := filepath.Join(dir, "zero.onnx")
	os.Symlink("/dev/zero", zero)
	for _, p := range []string{fifo, zero} {
		done := make(chan error, 1)
		go func() {
			_, err := regfile.SHA256(p)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, regfile.ErrNotRegular) {
				t.Errorf("%s: err = %v, want ErrNotRegular", p, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: SHA256 hung", p)
		}
	}
}
