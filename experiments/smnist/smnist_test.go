package smnist

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func idxBytes(typ byte, dims []uint32, payload []byte) []byte {
	var b bytes.Buffer
	b.Write([]byte{0, 0, typ, byte(len(dims))})
	for _, d := range dims {
		binary.Write(&b, binary.BigEndian, d)
	}
	b.Write(payload)
	return b.Bytes()
}

func TestParseIDX(t *testing.T) {
	payload := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	x, err := ParseIDX(bytes.NewReader(idxBytes(8, []uint32{2, 2, 3}, payload)))
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Dims) != 3 || x.Dims[0] != 2 || x.Dims[1] != 2 || x.Dims[2] != 3 || !bytes.Equal(x.Data, payload) {
		t.Fatalf("got dims %v data %v", x.Dims, x.Data)
	}
	good := idxBytes(8, []uint32{2, 2, 3}, payload)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "magic"},
		{"gzip", append([]byte{0x1f, 0x8b, 8, 0}, good[4:]...), "gzipped"},
		{"float type", idxBytes(0x0d, []uint32{3}, make([]byte, 12)), "element type"},
		{"no dimensions", idxBytes(8, nil, nil), "dimensions"},
		{"zero dimension", idxBytes(8, []uint32{2, 0}, nil), "zero"},
		{"short header", good[:9], "dimension 2"},
		{"truncated payload", good[:len(good)-1], "truncated"},
		{"trailing bytes", append(append([]byte(nil), good...), 0), "trailing"},
		{"huge", idxBytes(8, []uint32{1 << 20, 1 << 20}, nil), "exceed"},
	} {
		_, err := ParseIDX(bytes.NewReader(c.data))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
}

func TestLoadPairErrors(t *testing.T) {
	dir := t.TempDir()
	im := filepath.Join(dir, "im")
	lb := filepath.Join(dir, "lb")
	os.WriteFile(im, idxBytes(8, []uint32{2, Side, Side}, make([]byte, 2*Pixels)), 0o644)
	os.WriteFile(lb, idxBytes(8, []uint32{2}, []byte{3, 7}), 0o644)
	s, err := LoadPair(im, lb)
	if err != nil || s.Len() != 2 || s.Labels[1] != 7 {
		t.Fatalf("LoadPair: %v", err)
	}
	os.WriteFile(lb, idxBytes(8, []uint32{3}, []byte{3, 7, 1}), 0o644)
	if _, err := LoadPair(im, lb); err == nil {
		t.Error("label count mismatch accepted")
	}
	os.WriteFile(lb, idxBytes(8, []uint32{2}, []byte{3, 12}), 0o644)
	if _, err := LoadPair(im, lb); err == nil {
		t.Error("label 12 accepted")
	}
	os.WriteFile(im, idxBytes(8, []uint32{2, 27, 29}, make([]byte, 2*27*29)), 0o644)
	if _, err := LoadPair(im, lb); err == nil {
		t.Error("27×29 images accepted")
	}
	if _, _, err := LoadMNIST(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing folder accepted")
	}
}

// testMNIST returns MNIST (see testassets.RequireMNIST: $SEGTUNE_MNIST or
// the cache of scripts/install-mnist.sh) when present, else synthetic
// digit-like data; under $SEGTUNE_REQUIRE_ASSETS a missing MNIST fails.
func testMNIST(t *testing.T) (train, test *Set, real bool) {
	t.Helper()
	if dir := testassets.RequireMNIST(t); dir != "" {
		tr, te, err := LoadMNIST(dir)
		if err != nil {
			testassets.SkipOrFail(t, "MNIST at %s unusable: %v", dir, err)
		}
		t.Logf("MNIST from %s", dir)
		return tr, te, true
	}
	return Synthetic(3000, 1), Synthetic(1000, 2), false
}

func TestSMNISTConstruction(t *testing.T) {
	train, _, _ := testMNIST(t)
	m := train.Head(500)
	s := SMNIST(m, 0)
	if s.Len() != 1000 || len(s.Pixels) != 1000*Pixels {
		t.Fatalf("S-MNIST of 500 has %d examples", s.Len())
	}
	var orig, dbl float64
	for i := range 500 {
		if s.Labels[i] != m.Labels[i] || s.Labels[500+i] != m.Labels[i] {
			t.Fatalf("labels not preserved at %d", i)
		}
		if s.Doubled[i] || !s.Doubled[500+i] {
			t.Fatalf("Doubled flags wrong at %d", i)
		}
		if !bytes.Equal(s.Image(i), m.Image(i)) {
			t.Fatalf("original %d changed", i)
		}
		orig += float64(Foreground(s.Image(i)))
		dbl += float64(Foreground(s.Image(500 + i)))
	}
	ratio := dbl / orig
	t.Logf("mean foreground: original %.1f px, rescaled %.1f px (×%.2f)", orig/500, dbl/500, ratio)
	if ratio < 1.8 || ratio > 4 {
		t.Errorf("rescaled copy has ×%.2f the foreground, want about 2 (2–4)", ratio)
	}
	// Thresholding at the mean splits S-MNIST by its two modes.
	sizes := s.Sizes()
	cls := SizeClasses(sizes, MeanSize(sizes))
	agree := 0
	for i, c := range cls {
		if (c == 1) == s.Doubled[i] {
			agree++
		}
	}
	if frac := float64(agree) / float64(len(cls)); frac < 0.8 {
		t.Errorf("size class matches the copy for %.2f of examples, want the two modes separated (≥ 0.8)", frac)
	}
}

func TestRescaleEmpty(t *testing.T) {
	if Foreground(Rescale(make([]byte, Pixels), 2)) != 0 {
		t.Error("an empty image gained foreground")
	}
}

func TestShortTraining(t *testing.T) {
	runtimetest.Require(t)
	train, test, _ := testMNIST(t)
	d, err := Prepare(train, test, 1000, 500, 0) // 2000 training, 1000 test examples
	if err != nil {
		t.Fatal(err)
	}
	run := func(alpha float64, sched, head string) *Results {
		r, err := Run(Config{Alpha: alpha, Schedule: sched, Head: head, Epochs: 2, Seed: 1}, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s [%s]: acc %.3f, %.3f; size F1 %.3f; projections %d", r.Config.Name, head,
			r.Epochs[0].TestAcc, r.Epochs[1].TestAcc, r.SizeF1Test, r.Projections)
		return r
	}
	base := run(0, ScheduleEpoch, HeadInput)
	if base.Steps != 20 || len(base.Epochs) != 2 {
		t.Fatalf("%d steps per epoch, %d epochs; want 20, 2", base.Steps, len(base.Epochs))
	}
	if base.FinalAcc < 0.5 {
		t.Errorf("baseline accuracy %.3f: want well above chance (0.1)", base.FinalAcc)
	}
	if base.Projections != 0 {
		t.Errorf("baseline made %d projections", base.Projections)
	}
	epoch := run(1e-3, ScheduleEpoch, HeadInput)
	step := run(1e-3, ScheduleStep, HeadInput)
	for i := range 2 {
		if p := epoch.Epochs[i].Projections; p != 1 {
			t.Errorf("Algorithm 1, epoch %d: %d projections, want 1", i+1, p)
		}
		if p := step.Epochs[i].Projections; p != step.Steps {
			t.Errorf("full projections, epoch %d: %d projections, want %d", i+1, p, step.Steps)
		}
	}
	// The sibling S-measure unit shares no weight with the class units: the
	// classifier follows the baseline exactly.
	if epoch.FinalAcc != base.FinalAcc {
		t.Errorf("head input: accuracy %.4f differs from the baseline's %.4f", epoch.FinalAcc, base.FinalAcc)
	}
	// On the logits the regulariser reaches the class weights.
	lg := run(1e-2, ScheduleEpoch, HeadLogits)
	if lg.FinalAcc < 0.3 || lg.Projections != 2 {
		t.Errorf("head logits: accuracy %.3f, %d projections", lg.FinalAcc, lg.Projections)
	}
	if lg.Epochs[0].TrainLoss == base.Epochs[0].TrainLoss {
		t.Error("head logits: the regulariser left the classifier's loss unchanged")
	}
}
