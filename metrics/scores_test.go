package metrics

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

// Hand-computed: 3 classes, ignore 255.
//
//	true\pred  0  1  2
//	0          2  1  0     support 3
//	1          1  2  0     support 3
//	2          0  1  1     support 2
//	predicted  3  4  1
func handMatrix(t *testing.T) *Confusion {
	t.Helper()
	m := NewConfusion(3, 255)
	target := []uint8{0, 0, 0, 1, 1, 1, 2, 2, 255}
	pred := []uint8{0, 0, 1, 1, 1, 0, 2, 1, 2}
	if err := m.Add(pred, target); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScoresByHand(t *testing.T) {
	m := handMatrix(t)
	want := map[string][]float64{
		"IoU":       {2.0 / 4, 2.0 / 5, 1.0 / 2},
		"Dice":      {4.0 / 6, 4.0 / 7, 2.0 / 3},
		"Precision": {2.0 / 3, 2.0 / 4, 1.0 / 1},
		"Recall":    {2.0 / 3, 2.0 / 3, 1.0 / 2},
	}
	got := map[string][]float64{"IoU": m.IoU(), "Dice": m.Dice(), "Precision": m.Precision(), "Recall": m.Recall()}
	for name, w := range want {
		for c := range w {
			if math.Abs(got[name][c]-w[c]) > 1e-12 {
				t.Errorf("%s[%d] = %v, want %v", name, c, got[name][c], w[c])
			}
		}
	}
	if s := m.Support(); s[0] != 3 || s[1] != 3 || s[2] != 2 {
		t.Errorf("support %v", s)
	}
	r := NewReport(m, []string{"bg", "", "car"})
	if math.Abs(*r.MeanDice-(4.0/6+4.0/7+2.0/3)/3) > 1e-12 || math.Abs(*r.MeanRecall-(2.0/3+2.0/3+0.5)/3) > 1e-12 {
		t.Errorf("means: dice %v recall %v", *r.MeanDice, *r.MeanRecall)
	}
	if r.Classes[1].Name != "class 1" || r.Classes[2].Support != 2 {
		t.Errorf("classes %+v", r.Classes)
	}
	norm := m.RowNormalized()
	if norm[2][1] != 0.5 || math.Abs(norm[0][0]-2.0/3) > 1e-12 {
		t.Errorf("normalised rows %v", norm)
	}
}

// A class never predicted has no precision; one in no mask no recall; the
// JSON carries null for them, not NaN.
func TestScoresUndefined(t *testing.T) {
	m := NewConfusion(3, 255)
	if err := m.Add([]uint8{0, 0, 2}, []uint8{0, 1, 0}); err != nil {
		t.Fatal(err)
	}
	r := NewReport(m, nil)
	if r.Classes[1].Precision != nil || r.Classes[1].Recall == nil || *r.Classes[1].Recall != 0 {
		t.Errorf("class 1 (never predicted): %+v", r.Classes[1])
	}
	if r.Classes[2].Recall != nil || r.Classes[2].Precision == nil || *r.Classes[2].Precision != 0 {
		t.Errorf("class 2 (in no mask): %+v", r.Classes[2])
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"precision":null`) {
		t.Errorf("JSON %s", data)
	}
}

// The scores agree with numpy's, computed from the same label maps by
// numpy's own bincount, on random masks with ignored pixels.
func TestScoresAgainstNumpy(t *testing.T) {
	const py = "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import numpy").CombinedOutput(); err != nil {
		testassets.SkipOrFail(t, "%s cannot import numpy: %v %s", py, err, out)
	}
	const k, n = 5, 20000
	rng := rand.New(rand.NewPCG(3, 4))
	pred, target := make([]uint8, n), make([]uint8, n)
	for i := range pred {
		target[i] = uint8(rng.IntN(k))
		if rng.IntN(10) == 0 {
			target[i] = 255
		}
		pred[i] = target[i]
		if target[i] == 255 || rng.IntN(3) == 0 {
			pred[i] = uint8(rng.IntN(k - 1)) // class 4 is never predicted by mistake
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pred.bin"), pred, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "target.bin"), target, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import json, sys, numpy as np
d, k = sys.argv[1], int(sys.argv[2])
p = np.fromfile(d + "/pred.bin", dtype=np.uint8).astype(np.int64)
t = np.fromfile(d + "/target.bin", dtype=np.uint8).astype(np.int64)
keep = t != 255
cm = np.bincount(t[keep] * k + p[keep], minlength=k * k).reshape(k, k)
tp = np.diag(cm).astype(float)
sup, pr = cm.sum(1).astype(float), cm.sum(0).astype(float)
with np.errstate(divide="ignore", invalid="ignore"):
    out = dict(iou=tp / (sup + pr - tp), dice=2 * tp / (sup + pr), precision=tp / pr, recall=tp / sup)
print(json.dumps({a: [None if np.isnan(x) else float(x) for x in v] for a, v in out.items()} | {"cm": cm.tolist()}))
`
	out, err := exec.Command(py, "-c", script, dir, "5").Output()
	if err != nil {
		t.Fatalf("numpy: %v", err)
	}
	var ref struct {
		IoU, Dice, Precision, Recall []*float64
		CM                           [][]int64
	}
	if err := json.Unmarshal(out, &ref); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	m := NewConfusion(k, 255)
	if err := m.Add(pred, target); err != nil {
		t.Fatal(err)
	}
	for tc, row := range m.Rows() {
		for pc, v := range row {
			if v != ref.CM[tc][pc] {
				t.Fatalf("cell (%d,%d) = %d, numpy %d", tc, pc, v, ref.CM[tc][pc])
			}
		}
	}
	r := NewReport(m, nil)
	for c, cr := range r.Classes {
		for _, s := range []struct {
			name      string
			got, want *float64
		}{{"iou", cr.IoU, ref.IoU[c]}, {"dice", cr.Dice, ref.Dice[c]}, {"precision", cr.Precision, ref.Precision[c]}, {"recall", cr.Recall, ref.Recall[c]}} {
			if (s.got == nil) != (s.want == nil) || (s.got != nil && math.Abs(*s.got-*s.want) > 1e-12) {
				t.Errorf("class %d %s: %v, numpy %v", c, s.name, deref(s.got), deref(s.want))
			}
		}
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func TestConfusionText(t *testing.T) {
	var b bytes.Buffer
	WriteConfusionText(&b, handMatrix(t), []string{"bg", "person", "car"})
	text := b.String()
	// car's row: half right, half taken for a person.
	if !strings.Contains(text, "2 car              0.0  50.0  50.0") {
		t.Errorf("matrix:\n%s", text)
	}
	big := NewConfusion(30, 255)
	if err := big.Add([]uint8{3, 3, 4, 7}, []uint8{3, 5, 5, 7}); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	WriteConfusionText(&b, big, nil)
	text = b.String()
	if !strings.Contains(text, "50.0 % of class 5 predicted as class 3 (1 pixels)") || strings.Count(text, "\n") != 3 {
		t.Errorf("summary of 30 classes:\n%s", text)
	}
}

func TestConfusionFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "conf")
	if err := WriteConfusionFiles(dir, handMatrix(t), []string{"bg", "person, adult", "car"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "confusion.csv"))
	if err != nil {
		t.Fatal(err)
	}
	want := "true \\ predicted,bg,\"person, adult\",car\nbg,2,1,0\n\"person, adult\",1,2,0\ncar,0,1,1\n"
	if string(data) != want {
		t.Errorf("CSV:\n%s\nwant\n%s", data, want)
	}
	f, err := os.Open(filepath.Join(dir, "confusion.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 200 || b.Dx() != b.Dy() {
		t.Errorf("heat map is %v", b)
	}
	// Many classes still give a bounded image.
	big := NewConfusion(150, 255)
	var buf bytes.Buffer
	if err := RenderConfusionPNG(&buf, big, nil); err != nil {
		t.Fatal(err)
	}
	if cfg, err := png.DecodeConfig(&buf); err != nil || cfg.Width > 2000 {
		t.Errorf("150 classes: %+v %v", cfg, err)
	}
}
