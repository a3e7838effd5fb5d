package checkpoint

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flipByte corrupts the byte at offset n of what goes to the file, after
// the writer computed its checksum.
type flipByte struct {
	w   io.Writer
	n   int
	off int
}

func (f *flipByte) Write(p []byte) (int, error) {
	q := append([]byte(nil), p...)
	if i := f.n - f.off; i >= 0 && i < len(q) {
		q[i] ^= 0x40
	}
	f.off += len(p)
	return f.w.Write(q)
}

// Defect: a checkpoint that did not read back intact still counted.
func TestSaveVerifiesReadBack(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, LastName)
	size := len(encode(t, sample()))
	err := save(path, sample(), func(w io.Writer) io.Writer { return &flipByte{w: w, n: size - 40} })
	if err == nil || !strings.Contains(err.Error(), "does not read back intact") || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v", err)
	}
	if err := Verify(path, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Verify of the corrupt file: %v", err)
	}
}

func corrupt(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-40] ^= 0xff // in the data, past the metadata: ReadInfo still reads it
	os.Remove(path)      // best.ckpt may be a hard link to last.ckpt
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Defect: a corrupt best.ckpt was ranked by its (intact) metadata, so no
// later epoch could replace it and the final export failed.
func TestCorruptBestIsNotRanked(t *testing.T) {
	dir := t.TempDir()
	k := &Keeper{Dir: dir, Metric: "val_miou", RunID: "r1"}
	c := sample()
	c.Metrics = map[string]float64{"val_miou": 0.9}
	if _, err := k.Save(c); err != nil {
		t.Fatal(err)
	}
	corrupt(t, k.BestPath())
	if _, err := ReadInfo(k.BestPath()); err != nil {
		t.Fatalf("the corruption should leave the metadata readable: %v", err)
	}
	var log bytes.Buffer
	k = &Keeper{Dir: dir, Metric: "val_miou", RunID: "r1", Log: &log} // a resumed run
	c = sample()
	c.Step = 2000
	c.Metrics = map[string]float64{"val_miou": 0.5}
	best, err := k.Save(c)
	if err != nil || !best {
		t.Fatalf("best = %v, err = %v: the corrupt best.ckpt still ranks", best, err)
	}
	if got, err := k.LoadBest(); err != nil || got.Step != 2000 {
		t.Fatalf("best.ckpt: %v, %v", got, err)
	}
	aside, _ := filepath.Glob(filepath.Join(dir, BestName+".corrupt-*"))
	if len(aside) != 1 || !strings.Contains(log.String(), "moved it to") {
		t.Errorf("the corrupt best.ckpt was not kept aside: %v; log %q", aside, log.String())
	}
	if p, ok := k.ExportPath(); !ok || p != k.BestPath() {
		t.Errorf("ExportPath = %s, %v", p, ok)
	}
	corrupt(t, k.BestPath()) // corrupted again after the run ranked it
	if p, ok := k.ExportPath(); !ok || p != k.LastPath() {
		t.Errorf("with best.ckpt corrupt, ExportPath = %s, %v; want last.ckpt", p, ok)
	}
}

// Defect: a best.ckpt left by another run was ranked against (and
// exported by) a new run.
func TestForeignBestIsNotRanked(t *testing.T) {
	dir := t.TempDir()
	old := &Keeper{Dir: dir, Metric: "val_miou", RunID: "old"}
	c := sample()
	c.Metrics = map[string]float64{"val_miou": 0.99}
	if _, err := old.Save(c); err != nil {
		t.Fatal(err)
	}
	k := &Keeper{Dir: dir, Metric: "val_miou", RunID: "new"}
	c = sample()
	c.Metrics = map[string]float64{"val_miou": 0.1}
	if best, err := k.Save(c); err != nil || !best {
		t.Fatalf("best = %v, err = %v", best, err)
	}
	got, err := k.LoadBest()
	if err != nil || got.RunID != "new" {
		t.Fatalf("best.ckpt is from run %q (%v)", got.RunID, err)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, BestName+".foreign-*")); len(aside) != 1 {
		t.Errorf("foreign best.ckpt not kept: %v", aside)
	}
}

// stallEnv makes the test binary a writer that stops halfway through
// writing last.ckpt and waits to be killed (see TestKillMidWrite).
const stallEnv = "SEGTUNE_CHECKPOINT_STALL_DIR"

// stallWriter passes n bytes through, then signals (creating a marker
// file) and blocks forever.
type stallWriter struct {
	w      io.Writer
	n      int
	marker string
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if len(p) <= s.n {
		s.n -= len(p)
		return s.w.Write(p)
	}
	if _, err := s.w.Write(p[:s.n]); err != nil {
		return 0, err
	}
	if f, ok := s.w.(interface{ Sync() error }); ok {
		f.Sync()
	}
	os.WriteFile(s.marker, nil, 0o644)
	// Killed here, mid-write. A sleep, not select{}: with every goroutine
	// blocked, Go's deadlock detector would end the process first.
	time.Sleep(time.Hour)
	return 0, nil
}

func TestStallChild(t *testing.T) {
	dir := os.Getenv(stallEnv)
	if dir == "" {
		t.Skip("helper process for TestKillMidWrite")
	}
	k := &Keeper{Dir: dir, Metric: "val_miou"}
	first := sample()
	first.Step = 1
	if _, err := k.Save(first); err != nil {
		os.Exit(2)
	}
	second := sample()
	second.Step = 2
	save(k.LastPath(), second, func(w io.Writer) io.Writer {
		return &stallWriter{w: w, n: 100, marker: filepath.Join(dir, "stalled")}
	})
	os.Exit(3) // not reached
}

// Killing a process in the middle of writing a checkpoint leaves the
// previous last.ckpt and best.ckpt intact and a partial temporary file,
// which the next save removes. (Deterministic: the child stops mid-write.)
func TestKillMidWrite(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStallChild$")
	cmd.Env = append(os.Environ(), stallEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	marker := filepath.Join(dir, "stalled")
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the writer exited before stalling: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cmd.Process.Kill()
	<-exited
	partial, _ := filepath.Glob(filepath.Join(dir, tempPrefix(LastName)+"*"))
	if len(partial) != 1 {
		t.Fatalf("want one partial temporary file, found %v", partial)
	}
	if fi, err := os.Stat(partial[0]); err != nil || fi.Size() != 100 {
		t.Fatalf("partial file: %v, %v", fi, err)
	}
	for _, name := range []string{LastName, BestName} {
		c, err := Load(filepath.Join(dir, name))
		if err != nil || c.Step != 1 {
			t.Fatalf("%s after the kill: %v, %v", name, c, err)
		}
	}
	k := &Keeper{Dir: dir, Metric: "val_miou"}
	next := sample()
	next.Step = 3
	if _, err := k.Save(next); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(partial[0]); !os.IsNotExist(err) {
		t.Error("the partial file of the killed write was not removed")
	}
}
