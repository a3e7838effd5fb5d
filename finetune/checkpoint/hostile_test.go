package checkpoint

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
