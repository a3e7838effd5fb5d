package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/finetune/optim"
)

func sample() *Checkpoint {
	return &Checkpoint{
		BaseModel: "models/deeplabv3plus_mobilenetv2.onnx",
		Epoch:     3,
		Step:      1200,
		Metrics:   map[string]float64{"val_miou": 0.715, "val_loss": 0.31},
		Config:    json.RawMessage(`{"lr":0.01,"schedule":"poly:0.9","batch":8}`),
		Weights: []Tensor{
			{Name: "backbone.conv1.weight", Shape: []int64{2, 1, 2, 2}, Data: []float32{1, -2, 3.5, float32(math.Copysign(0, -1)), math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-30, -7}},
			{Name: "head.bias", Shape: []int64{3}, Data: []float32{0.1, 0.2, 0.3}},
			{Name: "scale", Shape: []int64{}, Data: []float32{2}},
			{Name: "empty", Shape: []int64{0, 4}, Data: []float32{}},
		},
		Optimizer: &optim.State{Algorithm: optim.AdamW, Step: 1200, Buffers: []optim.Buffer{
			{Param: "head.bias", Slot: optim.SlotExpAvg, Data: []float32{1e-3, 2e-3, 3e-3}},
			{Param: "head.bias", Slot: optim.SlotExpAvgSq, Data: []float32{1e-6, 2e-6, 3e-6}},
		}},
		DataState:        []byte(`{"seed":42,"epoch_perm_pos":17}`),
		RegularizerState: []byte{0, 1, 2, 255},
		Created:          time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func encode(t *testing.T, c *Checkpoint) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func checkEqual(t *testing.T, got, want *Checkpoint) {
	t.Helper()
	for i := range want.Weights {
		if !sameBits(got.Weights[i].Data, want.Weights[i].Data) {
			t.Errorf("weight %s: got %v, want %v", want.Weights[i].Name, got.Weights[i].Data, want.Weights[i].Data)
		}
	}
	// Compare the rest with reflect, with bit-checked tensors made equal.
	g, w := *got, *want
	g.Weights, w.Weights = nil, nil
	for _, t := range got.Weights {
		g.Weights = append(g.Weights, Tensor{Name: t.Name, Shape: t.Shape})
	}
	for _, t := range want.Weights {
		w.Weights = append(w.Weights, Tensor{Name: t.Name, Shape: t.Shape})
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", g, w)
	}
}

func TestRoundTripExact(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.ckpt")
	want := sample()
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, want)

	in, err := ReadInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if in.Step != 1200 || in.BaseModel != want.BaseModel || in.Algorithm != optim.AdamW ||
		len(in.Weights) != 4 || in.Weights[0].Data != nil || in.Size != st.Size() || in.Metrics["val_miou"] != 0.715 {
		t.Errorf("ReadInfo = %+v", in)
	}

	// A minimal checkpoint (no optimiser, no opaque state) round trips too.
	min := &Checkpoint{Weights: []Tensor{{Name: "w", Shape: []int64{1}, Data: []float32{1}}}, Created: want.Created}
	if err := Save(path, min); err != nil {
		t.Fatal(err)
	}
	got, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, min)
}

// The optimiser state read back resumes an optimiser exactly.
func TestOptimizerStateResumes(t *testing.T) {
	p := &optim.Param{Name: "w", Shape: []int64{3}, Data: []float32{1, 2, 3}, Grad: []float32{0.1, -0.2, 0.3}}
	o, _ := optim.New([]*optim.Param{p}, optim.DefaultConfig(optim.Adam))
	o.Step(0.1)
	var b bytes.Buffer
	if err := Write(&b, &Checkpoint{Weights: []Tensor{{p.Name, p.Shape, p.Data}}, Optimizer: o.State()}); err != nil {
		t.Fatal(err)
	}
	c, err := Read(&b, int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	q := &optim.Param{Name: "w", Shape: []int64{3}, Data: c.Weights[0].Data, Grad: p.Grad}
	o2, _ := optim.New([]*optim.Param{q}, optim.DefaultConfig(optim.Adam))
	if err := o2.SetState(c.Optimizer); err != nil {
		t.Fatal(err)
	}
	o.Step(0.1)
	o2.Step(0.1)
	if !sameBits(p.Data, q.Data) {
		t.Errorf("resumed %v, uninterrupted %v", q.Data, p.Data)
	}
}

// Every proper prefix of a checkpoint is reported as truncated.
func TestTruncated(t *testing.T) {
	data := encode(t, sample())
	for n := 0; n < len(data); n++ {
		_, err := Read(bytes.NewReader(data[:n]), int64(n))
		if !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix of %d/%d bytes: err = %v, want ErrTruncated", n, len(data), err)
		}
	}
	// Load names the file.
	path := filepath.Join(t.TempDir(), "cut.ckpt")
	os.WriteFile(path, data[:len(data)/2], 0o644)
	_, err := Load(path)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(truncated) = %v", err)
	}
}

// Flipping any bit of any byte is detected.
func TestCorruptionDetected(t *testing.T) {
	data := encode(t, sample())
	for i := range data {
		for _, bit := range []byte{0x01, 0x80} {
			bad := bytes.Clone(data)
			bad[i] ^= bit
			if _, err := Read(bytes.NewReader(bad), int64(len(bad))); err == nil {
				t.Fatalf("flipping bit %#x of byte %d went unnoticed", bit, i)
			}
		}
	}
	extra := append(bytes.Clone(data), 0)
	if _, err := Read(bytes.NewReader(extra), int64(len(extra))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing byte: err = %v, want ErrCorrupt", err)
	}
}

func TestBadMagicAndVersion(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "model.onnx")
	os.WriteFile(png, []byte("\x08\x07\x12\x04onnx-model-bytes...."), 0o644)
	if _, err := Load(png); !errors.Is(err, ErrBadMagic) || !strings.Contains(err.Error(), png) {
		t.Errorf("Load(onnx file) = %v", err)
	}
	data := encode(t, sample())
	data[8] = 2
	path := filepath.Join(dir, "future.ckpt")
	os.WriteFile(path, data, 0o644)
	_, err := Load(path)
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("Load(version 2) = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.ckpt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load(folder) succeeded")
	}
}

// A checkpoint whose stored weights are NaN (written by something other
// than Save) is refused on load, naming the tensor.
func TestLoadRefusesNonFinite(t *testing.T) {
	c := sample()
	var b bytes.Buffer
	// Bypass Write's validation by encoding a finite value and patching
	// it, then fixing the CRC, as a foreign writer might.
	c.Weights[1].Data[1] = 12345
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	needle := []byte{0x00, 0xe4, 0x40, 0x46} // 12345 as float32 LE
	i := bytes.Index(data, needle)
	if i < 0 {
		t.Fatal("value not found")
	}
	copy(data[i:], []byte{0x00, 0x00, 0xc0, 0x7f}) // NaN
	fixCRC(data)
	_, err := Read(bytes.NewReader(data), int64(len(data)))
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "head.bias") {
		t.Errorf("Read(NaN weight) = %v", err)
	}
}

func fixCRC(data []byte) {
	n := len(data) - footerSize
	sum := crcOf(data[:n])
	data[n], data[n+1], data[n+2], data[n+3] = byte(sum), byte(sum>>8), byte(sum>>16), byte(sum>>24)
}

// Save refuses non-finite weights and leaves the previous file intact.
func TestSaveRefusesNonFinite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "last.ckpt")
	good := sample()
	if err := Save(path, good); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		bad := sample()
		bad.Weights[0].Data[2] = v
		err := Save(path, bad)
		if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "backbone.conv1.weight") || !strings.Contains(err.Error(), path) {
			t.Errorf("Save(%v weight) = %v", v, err)
		}
	}
	bad := sample()
	bad.Optimizer.Buffers[1].Data[0] = float32(math.NaN())
	if err := Save(path, bad); !errors.Is(err, ErrNonFinite) {
		t.Errorf("Save(NaN moment) = %v", err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	checkEqual(t, got, good)
}

func TestValidate(t *testing.T) {
	cases := map[string]func(c *Checkpoint){
		"empty name":   func(c *Checkpoint) { c.Weights[0].Name = "" },
		"duplicate":    func(c *Checkpoint) { c.Weights[1].Name = c.Weights[0].Name },
		"shape":        func(c *Checkpoint) { c.Weights[1].Shape = []int64{4} },
		"negative dim": func(c *Checkpoint) { c.Weights[3].Shape = []int64{-1, 0} },
		"config":       func(c *Checkpoint) { c.Config = json.RawMessage(`{"lr":`) },
		"metric":       func(c *Checkpoint) { c.Metrics["val_miou"] = math.NaN() },
		"counters":     func(c *Checkpoint) { c.Step = -1 },
	}
	for name, corrupt := range cases {
		c := sample()
		corrupt(c)
		if err := Write(io.Discard, c); err == nil {
			t.Errorf("%s: Write accepted an invalid checkpoint", name)
		}
	}
}

// failAfter fails every write once n bytes have passed, like a full disk
// or a crash mid-write.
type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, errors.New("disk full")
	}
	f.n -= len(p)
	return f.w.Write(p)
}

func TestFailedWriteKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "last.ckpt")
	good := sample()
	if err := Save(path, good); err != nil {
		t.Fatal(err)
	}
	size := len(encode(t, sample()))
	next := sample()
	next.Step = 1300
	for _, n := range []int{0, 10, size / 2, size - 1} {
		err := save(path, next, func(w io.Writer) io.Writer { return &failAfter{w, n} })
		if err == nil || !strings.Contains(err.Error(), "disk full") || !strings.Contains(err.Error(), path) {
			t.Fatalf("failing after %d bytes: err = %v", n, err)
		}
		got, err := Load(path)
		if err != nil {
			t.Fatalf("after a failed save at %d bytes: %v", n, err)
		}
		checkEqual(t, got, good)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("failed saves left files behind: %v", entries)
	}
}

func TestKeeperBest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	k := &Keeper{Dir: dir, Metric: "val_miou"}
	save := func(step int64, miou float64, has bool) bool {
		c := sample()
		c.Step = step
		c.Metrics = map[string]float64{}
		if has {
			c.Metrics["val_miou"] = miou
		}
		best, err := k.Save(c)
		if err != nil {
			t.Fatal(err)
		}
		return best
	}
	steps := func() (last, best int64) {
		l, err := ReadInfo(k.LastPath())
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadInfo(k.BestPath())
		if err != nil {
			t.Fatal(err)
		}
		return l.Step, b.Step
	}
	if !save(1, 0.5, true) {
		t.Error("first checkpoint is not the best")
	}
	if save(2, 0.4, true) {
		t.Error("worse checkpoint became the best")
	}
	if save(3, 0, false) {
		t.Error("checkpoint without the metric became the best")
	}
	if l, b := steps(); l != 3 || b != 1 {
		t.Errorf("last step %d, best step %d; want 3, 1", l, b)
	}
	if !save(4, 0.6, true) {
		t.Error("better checkpoint is not the best")
	}
	save(5, 0.55, true)
	if l, b := steps(); l != 5 || b != 4 {
		t.Errorf("last step %d, best step %d; want 5, 4", l, b)
	}
	// A new Keeper (a resumed run) reads the best metric from best.ckpt.
	k = &Keeper{Dir: dir, Metric: "val_miou"}
	if save(6, 0.59, true) {
		t.Error("resumed keeper forgot the best metric")
	}
	// Stale temporaries of a killed save are cleaned up.
	stale := filepath.Join(dir, tempPrefix(LastName)+"123")
	os.WriteFile(stale, []byte("partial"), 0o644)
	save(7, 0.1, true)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temporary file not removed")
	}
	if c, err := k.LoadBest(); err != nil || c.Step != 4 {
		t.Errorf("LoadBest: step %v, %v", c, err)
	}
	if c, err := k.LoadLast(); err != nil || c.Step != 7 {
		t.Errorf("LoadLast: %v", err)
	}

	low := &Keeper{Dir: t.TempDir(), Metric: "val_loss", LowerIsBetter: true}
	for i, loss := range []float64{0.5, 0.7, 0.3} {
		c := sample()
		c.Metrics = map[string]float64{"val_loss": loss}
		best, _ := low.Save(c)
		if want := i != 1; best != want {
			t.Errorf("loss %v: best = %v, want %v", loss, best, want)
		}
	}
}

// crashChildEnv makes the test binary a checkpoint writer that runs until
// killed (see TestSIGKILLKeepsLastGood).
const crashChildEnv = "SEGTUNE_CHECKPOINT_CRASH_DIR"

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("helper process for TestSIGKILLKeepsLastGood")
	}
	k := &Keeper{Dir: dir, Metric: "val_miou"}
	w := make([]float32, 1<<18) // 1 MiB, so kills land mid-write
	for step := int64(1); ; step++ {
		for i := range w {
			w[i] = float32(step)
		}
		c := &Checkpoint{Step: step, Metrics: map[string]float64{"val_miou": float64(step % 7)},
			Weights: []Tensor{{Name: "w", Shape: []int64{int64(len(w))}, Data: w}}}
		if _, err := k.Save(c); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// SIGKILL a process that writes checkpoints in a loop, at varied moments;
// last.ckpt and best.ckpt must always load and be self-consistent.
func TestSIGKILLKeepsLastGood(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	midWrite := 0
	for round := range 8 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Wait for at least one more save, then kill at a varied moment.
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(dir, BestName)); err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(round*3) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		if tmp, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(tmp) > 0 {
			midWrite++
		}
		for _, name := range []string{LastName, BestName} {
			c, err := Load(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for _, v := range c.Weights[0].Data {
				if v != float32(c.Step) {
					t.Fatalf("round %d: %s at step %d holds %v", round, name, c.Step, v)
				}
			}
		}
	}
	t.Logf("%d of 8 kills left a partial temporary file", midWrite)
}

func FuzzLoad(f *testing.F) {
	var b bytes.Buffer
	Write(&b, sample())
	f.Add(b.Bytes())
	b.Reset()
	Write(&b, &Checkpoint{Weights: []Tensor{{Name: "w", Shape: []int64{2}, Data: []float32{1, 2}}}})
	f.Add(b.Bytes())
	f.Add([]byte(magic + "\x01\x00\x00\x00\x02\x00\x00\x00{}"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		var out bytes.Buffer
		c2 := *c
		if err := Write(&out, &c2); err != nil {
			t.Fatalf("decoded checkpoint does not re-encode: %v", err)
		}
		if _, err := Read(bytes.NewReader(out.Bytes()), int64(out.Len())); err != nil {
			t.Fatalf("re-encoded checkpoint does not decode: %v", err)
		}
	})
}

func TestErrorsNameTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.ckpt")
	os.WriteFile(path, []byte(magic+"\x01\x00\x00\x00"+strconv.Itoa(0)), 0o644)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load = %v", err)
	}
	if _, err := ReadInfo(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadInfo = %v", err)
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
