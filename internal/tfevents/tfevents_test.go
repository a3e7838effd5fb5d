package tfevents_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/internal/tfevents"
)

type event struct {
	WallTime    float64 `json:"wall_time"`
	Step        int64   `json:"step"`
	FileVersion string  `json:"file_version"`
	Summary     []struct {
		Tag         string `json:"tag"`
		SimpleValue any    `json:"simple_value"` // a number, or "inf", "-inf", "nan"
		Image       *struct {
			Height, Width, Colorspace, Bytes int
			PNG                              string `json:"png"`
		} `json:"image"`
	} `json:"summary"`
	SessionLog int `json:"session_log"`
}

// TestEventsReadByAnIndependentParser writes scalars, an image and a
// restart, and reads the file back with testdata/read_events.py: the
// TFRecord framing and CRC-32C computed there bit by bit, the events
// decoded by Python's protobuf library from descriptors of event.proto's
// fields.
func TestEventsReadByAnIndependentParser(t *testing.T) {
	py := testassets.RequirePython(t, "google.protobuf")
	dir := filepath.Join(t.TempDir(), "tb")
	w, err := tfevents.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 100)...)
	if err := w.Scalars(7, map[string]float64{"step/loss": 0.5, "step/lr": 1e-4, "epoch/val_iou_person": 0.3125}); err != nil {
		t.Fatal(err)
	}
	if err := w.Image(7, "samples", png, 320, 240); err != nil {
		t.Fatal(err)
	}
	if err := w.Restart(5); err != nil {
		t.Fatal(err)
	}
	if err := w.Scalars(6, map[string]float64{"step/loss": math.Inf(1)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if len(files) != 1 || files[0] != w.Path() {
		t.Fatalf("event files %v, want %s", files, w.Path())
	}
	out, err := exec.Command(py, "testdata/read_events.py", w.Path()).Output()
	if err != nil {
		t.Fatalf("read_events.py: %v", err)
	}
	var evs []event
	if err := json.Unmarshal(out, &evs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(evs) != 5 || evs[0].FileVersion != "brain.Event:2" {
		t.Fatalf("events %s", out)
	}
	s := evs[1].Summary
	num := func(v any) float64 { f, _ := v.(float64); return f }
	if evs[1].Step != 7 || len(s) != 3 || s[0].Tag != "epoch/val_iou_person" || num(s[0].SimpleValue) != 0.3125 ||
		s[1].Tag != "step/loss" || num(s[1].SimpleValue) != 0.5 || s[2].Tag != "step/lr" || math.Abs(num(s[2].SimpleValue)-1e-4) > 1e-11 {
		t.Errorf("scalars %s", out)
	}
	if im := evs[2].Summary[0].Image; im == nil || im.Height != 240 || im.Width != 320 || im.Colorspace != 3 || im.Bytes != len(png) || im.PNG != "89504e470d0a1a0a" {
		t.Errorf("image %s", out)
	}
	if evs[3].Step != 5 || evs[3].SessionLog != 1 {
		t.Errorf("restart %+v", evs[3])
	}
	if evs[4].Step != 6 || evs[4].Summary[0].SimpleValue != "inf" {
		t.Errorf("infinite loss %s", out)
	}
	if evs[1].WallTime <= 1.7e9 {
		t.Errorf("wall time %v", evs[1].WallTime)
	}
	// A damaged byte is caught by the reader's CRC: the check above is real.
	data, _ := os.ReadFile(w.Path())
	data[len(data)-10] ^= 1
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, data, 0o644)
	if out, err := exec.Command(py, "testdata/read_events.py", bad).CombinedOutput(); err == nil || !bytes.Contains(out, []byte("CRC")) {
		t.Errorf("a damaged file read without a CRC error: %s", out)
	}
}

// TestCreateNeverOverwrites: two writers in one folder get two files, and
// a link where the folder should be is refused.
func TestCreateNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	a, err := tfevents.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tfevents.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Path() == b.Path() {
		t.Fatalf("both writers write %s", a.Path())
	}
	a.Close()
	b.Close()
	link := filepath.Join(t.TempDir(), "tb")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := tfevents.Create(link); err == nil {
		t.Error("a symbolic link as the event folder was accepted")
	}
}
