package regfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Defect: opening a FIFO blocked the program forever.
func TestOpenRefusesFIFOWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.onnx")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	link := filepath.Join(dir, "link.json")
	os.Symlink(fifo, link)
	for _, p := range []string{fifo, link} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadSmall(p, 100)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: err = %v, want ErrNotRegular", p, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: reading a FIFO blocked", p)
		}
	}
	if _, _, err := Open(dir); !errors.Is(err, ErrNotRegular) {
		t.Errorf("folder: err = %v", err)
	}
}

// Defect: small files were read without a size limit (/dev/zero killed the
// process).
func TestReadSmallLimit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	os.WriteFile(p, make([]byte, 101), 0o644)
	var tl *TooLargeError
	if _, err := ReadSmall(p, 100); !errors.As(err, &tl) {
		t.Errorf("err = %v, want TooLargeError", err)
	}
	if b, err := ReadSmall(p, 101); err != nil || len(b) != 101 {
		t.Errorf("%d bytes, %v", len(b), err)
	}
	link := filepath.Join(dir, "zero.json")
	os.Symlink("/dev/zero", link)
	if _, err := ReadSmall(link, 100); !errors.Is(err, ErrNotRegular) {
		t.Errorf("/dev/zero: err = %v", err)
	}
}

// SHA256 digests regular files and refuses the rest before reading: a FIFO
// would block it, /dev/zero stream into the hash without end.
func TestSHA256(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.onnx")
	if err := os.WriteFile(p, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := SHA256(p)
	if want := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; err != nil || got != want {
		t.Errorf("SHA256 = %q, %v; want %q (FIPS 180-2's \"abc\")", got, err, want)
	}
	zero := filepath.Join(dir, "zero.onnx")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	if _, err := SHA256(zero); !errors.Is(err, ErrNotRegular) {
		t.Errorf("SHA256 of a link to /dev/zero: %v, want ErrNotRegular", err)
	}
}

// OpenLimit refuses a file over the limit from its size, and one that
// grows past it while read.
func TestOpenLimit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.json")
	os.WriteFile(p, make([]byte, 101), 0o644)
	var tl *TooLargeError
	if _, err := OpenLimit(p, 100); !errors.As(err, &tl) || tl.Limit != 100 {
		t.Errorf("err = %v, want TooLargeError", err)
	}
	f, err := OpenLimit(p, 101)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.WriteFile(p, make([]byte, 150), 0o644) // grows after the open
	b, err := io.ReadAll(f)
	if !errors.As(err, &tl) || len(b) > 102 {
		t.Errorf("read %d bytes, err %v; want TooLargeError after at most 102", len(b), err)
	}
}
