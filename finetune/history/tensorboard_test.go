package history

import (
	"encoding/json"
	"image"
	"image/png"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

// TestTensorBoardMirrorsRecords: a Writer teed to TensorBoard writes each
// record's fields as KIND/FIELD scalars, and Image adds a PNG with its size.
func TestTensorBoardMirrorsRecords(t *testing.T) {
	py := testassets.RequirePython(t, "google.protobuf")
	dir := t.TempDir()
	w, err := Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := OpenTensorBoard(filepath.Join(dir, "tb"), 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Tee(tb)
	if err := w.Write(Record{Kind: KindStep, Step: 3, Loss: 0.25, LR: 0.5}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Record{Kind: KindEpoch, Step: 3, Loss: 0.25, Extra: map[string]float64{"val_miou": 0.75}}); err != nil {
		t.Fatal(err)
	}
	sheet := filepath.Join(dir, "samples.png")
	f, _ := os.Create(sheet)
	png.Encode(f, image.NewRGBA(image.Rect(0, 0, 7, 5)))
	f.Close()
	if err := tb.Image(3, "samples", sheet); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "tb", "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v", files)
	}
	out, err := exec.Command(py, testassets.FindUp("internal/tfevents/testdata/read_events.py"), files[0]).Output()
	if err != nil {
		t.Fatal(err)
	}
	var evs []struct {
		Step    int64
		Summary []struct {
			Tag         string
			SimpleValue float64 `json:"simple_value"`
			Image       *struct{ Width, Height int }
		}
	}
	if err := json.Unmarshal(out, &evs); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, e := range evs[1:3] {
		for _, v := range e.Summary {
			got[v.Tag] = v.SimpleValue
		}
	}
	want := map[string]float64{"step/loss": 0.25, "step/lr": 0.5, "epoch/loss": 0.25, "epoch/val_miou": 0.75}
	if len(got) != len(want) {
		t.Errorf("scalars %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(evs) != 4 || evs[3].Summary[0].Image == nil || evs[3].Summary[0].Image.Width != 7 || evs[3].Summary[0].Image.Height != 5 {
		t.Errorf("image event %s", out)
	}
}

// A resumed run whose restart marker cannot be written (here: a file-size
// limit that holds the event file's header and nothing more) is refused,
// not left to write a log without it. The child process holds the limit.
func TestOpenTensorBoardReportsFailedRestart(t *testing.T) {
	if os.Getenv("SEGTUNE_TEST_FSIZE_CHILD") == "1" {
		fresh, err := OpenTensorBoard(filepath.Join(t.TempDir(), "fresh"), 0)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(fresh.w.Path())
		if err != nil {
			t.Fatal(err)
		}
		fresh.Close()
		signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Fatalf("RLIMIT_FSIZE: %v", err)
		}
		lim.Cur = uint64(fi.Size()) // the header's size
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			t.Fatalf("RLIMIT_FSIZE: %v", err)
		}
		tb, err := OpenTensorBoard(filepath.Join(t.TempDir(), "tb"), 5)
		if err == nil {
			tb.Close()
			t.Fatal("resuming a TensorBoard log that cannot be written: no error")
		}
		t.Log(err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOpenTensorBoardReportsFailedRestart$", "-test.v")
	cmd.Env = append(os.Environ(), "SEGTUNE_TEST_FSIZE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "file too large") {
		t.Errorf("child: %v\n%s", err, out)
	}
}
