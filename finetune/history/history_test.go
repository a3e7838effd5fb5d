package history

import (
	"bytes"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot/plotutil"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// run makes a synthetic run: a decaying noisy loss per step and a rising
// validation mIoU per epoch.
func run(epochs, stepsPerEpoch int, offset float64) []Record {
	var recs []Record
	step := int64(0)
	for e := range epochs {
		for s := range stepsPerEpoch {
			step++
			noise := 0.1 * math.Sin(float64(step)*1.7)
			recs = append(recs, Record{Kind: KindStep, Epoch: int64(e), Step: step,
				Loss: 2*math.Exp(-float64(step)/40) + 0.2 + noise + offset, LR: 0.01 * (1 - float64(step)/200),
				Seconds: 0.5, ImagesPerSec: 16 + float64(s%3)})
		}
		recs = append(recs, Record{Kind: KindEpoch, Epoch: int64(e), Step: step, Loss: 0.5 + offset, Seconds: 12.5,
			Extra: map[string]float64{"val_miou": 0.4 + 0.05*float64(e) - offset, "val_iou_person": 0.6 + 0.01*float64(e)}})
	}
	return recs
}

func TestJSONLRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	want := run(3, 5, 0)
	want = append(want,
		Record{Kind: KindStep, Epoch: 3, Step: 16, Loss: math.NaN(), LR: 1e-7},
		Record{Kind: KindStep, Epoch: 3, Step: 17, Loss: math.Inf(1), Extra: map[string]float64{"grad_norm": math.Inf(-1)}},
		Record{Kind: KindEpoch, Epoch: 3, Step: 17, Loss: 0.1 + 0.2, Extra: map[string]float64{"x": 5e-324, "y": math.Copysign(0, -1)}},
	)
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want[:10] {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// Reopening appends.
	w, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range want[10:] {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, wrote %d", len(got), len(want))
	}
	for i := range want {
		if !sameRecord(got[i], want[i]) {
			t.Errorf("record %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	data, _ := os.ReadFile(path)
	first := strings.SplitN(string(data), "\n", 2)[0]
	if !strings.HasPrefix(first, `{"kind":"step","epoch":0,"step":1,"loss":`) || !strings.Contains(first, `"images_per_s":16}`) {
		t.Errorf("first line = %s", first)
	}
	if !strings.Contains(string(data), `"loss":"NaN","lr":1e-07}`) {
		t.Errorf("NaN loss not written as \"NaN\":\n%s", data)
	}
}

func sameRecord(a, b Record) bool {
	eq := func(x, y float64) bool {
		return math.Float64bits(x) == math.Float64bits(y) || (math.IsNaN(x) && math.IsNaN(y))
	}
	if a.Kind != b.Kind || a.Epoch != b.Epoch || a.Step != b.Step || !eq(a.Loss, b.Loss) ||
		!eq(a.LR, b.LR) || !eq(a.Seconds, b.Seconds) || !eq(a.ImagesPerSec, b.ImagesPerSec) || len(a.Extra) != len(b.Extra) {
		return false
	}
	for k, v := range a.Extra {
		w, ok := b.Extra[k]
		// -0 is written as "-0" and reads back as -0.
		if !ok || !eq(v, w) {
			return false
		}
	}
	return true
}

func TestPartialLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	os.WriteFile(path, []byte(`{"kind":"step","epoch":0,"step":1,"loss":1.5}`+"\n"+`{"kind":"step","epoch":0,"st`), 0o644)
	recs, err := Read(path)
	if err != nil || len(recs) != 1 {
		t.Fatalf("Read = %v, %v; want the one whole record", recs, err)
	}
	// Appending after a crash starts a fresh line.
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(Record{Kind: KindStep, Step: 2, Loss: 1})
	w.Close()
	_, err = Read(path)
	if err == nil || !strings.Contains(err.Error(), path+", line 2:") {
		t.Errorf("the cut line, now complete, should be reported as line 2: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, in := range []string{
		"{\"kind\":\"step\",\"step\":1}\nnot json\n{\"kind\":\"step\"}\n",
		"{\"step\":1}\n",
		"{\"kind\":\"step\",\"step\":1.5}\n",
		"{\"kind\":\"step\",\"loss\":\"high\"}\n",
		"[1,2]\n",
	} {
		if _, err := Decode(strings.NewReader(in)); err == nil {
			t.Errorf("Decode(%q) succeeded", in)
		}
	}
	recs, err := Decode(strings.NewReader("\n{\"kind\":\"epoch\",\"epoch\":1,\"step\":9,\"loss\":0.5,\"run\":\"baseline\",\"val_miou\":null}\n\n"))
	if err != nil || len(recs) != 1 || !math.IsNaN(recs[0].Extra["val_miou"]) || len(recs[0].Extra) != 1 {
		t.Errorf("Decode = %+v, %v", recs, err)
	}
	if _, err := (Record{Kind: KindStep, Extra: map[string]float64{"loss": 1}}).MarshalJSON(); err == nil {
		t.Error("extra field named loss accepted")
	}
	if _, err := (Record{}).MarshalJSON(); err == nil {
		t.Error("record without kind accepted")
	}
}

func TestPlotPNG(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "curves.png")
	runs := []Run{{Name: "baseline", Records: run(6, 30, 0)}, {Name: "regularised", Records: run(6, 30, 0.05)}}
	if err := PlotPNG(path, runs, PlotOptions{Width: 640, Height: 480, Title: "DeepLabV3+ fine-tuning"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Errorf("size %v, want 640×480", b)
	}
	// Count pixels of each run's colour, not just any ink, so both
	// curves are known to be drawn.
	colours := map[color.RGBA]int{}
	nonWhite := 0
	for y := range 480 {
		for x := range 640 {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if c != (color.RGBA{255, 255, 255, 255}) {
				nonWhite++
			}
			colours[c]++
		}
	}
	if nonWhite < 2000 {
		t.Errorf("only %d non-background pixels", nonWhite)
	}
	if len(colours) < 10 {
		t.Errorf("only %d distinct colours; curves missing?", len(colours))
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}

	// Loss only, and metric only, still plot.
	var buf bytes.Buffer
	if err := RenderPNG(&buf, []Run{{Records: Filter(runs[0].Records, KindStep)}}, PlotOptions{Smoothing: -1}); err != nil {
		t.Errorf("loss only: %v", err)
	}
	cfg, err := png.DecodeConfig(&buf)
	if err != nil || cfg.Width != 1200 || cfg.Height != 900 {
		t.Errorf("default size: %+v, %v", cfg, err)
	}
	buf.Reset()
	nan := []Record{{Kind: KindStep, Step: 1, Loss: math.NaN()}, {Kind: KindEpoch, Epoch: 0, Extra: map[string]float64{"val_miou": 0.5}}}
	if err := RenderPNG(&buf, []Run{{Records: nan}}, PlotOptions{}); err != nil {
		t.Errorf("metric only: %v", err)
	}
}

func TestPlotErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderPNG(&buf, nil, PlotOptions{}); err == nil {
		t.Error("no runs accepted")
	}
	if err := RenderPNG(&buf, []Run{{Name: "empty"}}, PlotOptions{}); err == nil {
		t.Error("run without data accepted")
	}
	if err := RenderPNG(&buf, []Run{{Records: run(1, 3, 0)}}, PlotOptions{Width: 5}); err == nil {
		t.Error("5-pixel width accepted")
	}
	if err := RenderPNG(&buf, []Run{{Records: run(1, 3, 0)}}, PlotOptions{Smoothing: 1}); err == nil {
		t.Error("smoothing 1 accepted")
	}
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "x.png")
	if err := PlotPNG(missing, []Run{{Records: run(1, 3, 0)}}, PlotOptions{}); err == nil {
		t.Error("unwritable path accepted")
	}
}

// columns returns the start offsets (in runes) of each cell of line.
func columns(line string) []int {
	var starts []int
	prevSpace := true
	for i, r := range []rune(line) {
		if r != ' ' && prevSpace {
			starts = append(starts, i)
		}
		prevSpace = r == ' '
	}
	return starts
}

func TestTableAligns(t *testing.T) {
	tab := &Table{
		Header: []string{"run", "val_miou", "note", "time"},
		Rows: [][]string{
			{"baseline", "0.7012", "plain", "1h2m3s"},
			{"régularisé", "0.71", "with projection", "59s"},
			{"x", "-", "", "-"},
		},
	}
	out := tab.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	// Numeric columns end at the same rune offset; text columns start at
	// the same offset.
	ends := func(line, cell string) int {
		i := strings.Index(line, cell)
		return utf8.RuneCountInString(line[:i]) + utf8.RuneCountInString(cell)
	}
	if a, b := ends(lines[2], "0.7012"), ends(lines[3], "0.71"); a != b || a != ends(lines[0], "val_miou") {
		t.Errorf("numbers not right-aligned:\n%s", out)
	}
	if a, b := columns(lines[2])[2], columns(lines[3])[2]; a != b {
		t.Errorf("text column not left-aligned:\n%s", out)
	}
	if a, b := ends(lines[2], "1h2m3s"), ends(lines[3], "59s"); a != b {
		t.Errorf("durations not right-aligned:\n%s", out)
	}
	if !strings.HasPrefix(lines[1], "----------  --------") {
		t.Errorf("rule = %q", lines[1])
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing space in %q", l)
		}
	}
}

// The table and the curves number epochs from 1, as the run's progress
// lines do; metrics.jsonl keeps the index from 0.
func TestEpochsNumberedFromOne(t *testing.T) {
	recs := run(2, 3, 0)
	lines := strings.Split(strings.TrimSpace(EpochTable(recs).String()), "\n")
	if f1, f2 := strings.Fields(lines[2]), strings.Fields(lines[3]); f1[0] != "1" || f2[0] != "2" {
		t.Errorf("table epochs %q, %q; want 1, 2", f1[0], f2[0])
	}
	pts := metricPoints(recs, "val_miou")
	if len(pts) != 2 || pts[0].X != 1 || pts[1].X != 2 {
		t.Errorf("curve epochs %v; want x = 1, 2", pts)
	}
	if e := Filter(recs, KindEpoch)[0].Epoch; e != 0 {
		t.Errorf("first epoch record has epoch %d; want 0", e)
	}
}

func TestSummaryTables(t *testing.T) {
	recs := run(3, 4, 0)
	e := EpochTable(recs).String()
	lines := strings.Split(strings.TrimSpace(e), "\n")
	if len(lines) != 5 {
		t.Fatalf("epoch table:\n%s", e)
	}
	if h := strings.Fields(lines[0]); !reflect.DeepEqual(h, []string{"epoch", "step", "loss", "lr", "seconds", "images/s", "val_miou", "val_iou_person"}) {
		t.Errorf("header = %v", h)
	}
	if f := strings.Fields(lines[4]); f[0] != "3" || f[1] != "12" || f[6] != "0.5" || f[3] != "-" {
		t.Errorf("last row = %v", f)
	}

	for _, v := range []struct {
		x    float64
		want string
	}{{math.NaN(), "NaN"}, {3, "3"}, {0.71532, "0.7153"}, {1.5e-5, "1.5e-05"}, {math.Inf(-1), "-Inf"}} {
		if got := FormatNumber(v.x); got != v.want {
			t.Errorf("FormatNumber(%v) = %q, want %q", v.x, got, v.want)
		}
	}
}

// A run that logged the size regularizer's state gets a panel per group
// of RegularizerPanels below the loss and the metric, each drawing its
// fields; the image grows by a third of its base height per panel.
func TestPlotRegularizerPanels(t *testing.T) {
	recs := run(4, 10, 0)
	for i := range recs {
		if recs[i].Kind != KindEpoch {
			continue
		}
		e := float64(recs[i].Epoch)
		for _, spec := range RegularizerPanels {
			for k, f := range spec.Fields {
				recs[i].Extra[f] = e*0.1 + float64(k)
			}
		}
	}
	var buf bytes.Buffer
	if err := RenderPNG(&buf, []Run{{Name: "F1", Records: recs}}, PlotOptions{}); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	panels := len(RegularizerPanels)
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 900+300*panels {
		t.Fatalf("size %v, want 1200×%d", b, 900+300*panels)
	}
	// Each panel's band holds the colours of its fields' lines.
	for p, spec := range RegularizerPanels {
		y0 := 900 + 300*p
		for k := range spec.Fields {
			want := color.RGBAModel.Convert(plotutil.Color(k)).(color.RGBA)
			n := 0
			for y := y0; y < y0+300; y++ {
				for x := range 1200 {
					if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == want {
						n++
					}
				}
			}
			if n < 50 {
				t.Errorf("panel %q: %d pixels of the colour of %s", spec.Title, n, spec.Fields[k])
			}
		}
	}
	// Without the fields, no panels.
	buf.Reset()
	if err := RenderPNG(&buf, []Run{{Records: run(4, 10, 0)}}, PlotOptions{}); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := png.DecodeConfig(&buf); cfg.Height != 900 {
		t.Errorf("height %d without the regularizer's fields, want 900", cfg.Height)
	}
}

// Defect: metrics.jsonl was opened through a symbolic link, so every step
// appended to the file it pointed at, outside the run folder.
func TestOpenRefusesLinksAndSpecialFiles(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim.txt")
	os.WriteFile(victim, []byte("mine\n"), 0o644)
	link := filepath.Join(dir, "metrics.jsonl")
	os.Symlink(victim, link)
	if w, err := Open(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		if w != nil {
			w.Close()
		}
		t.Errorf("a link: err = %v, want a refusal", err)
	}
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		if w, err := Open(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			if w != nil {
				w.Close()
			}
			t.Errorf("a FIFO: err = %v, want a refusal", err)
		}
	}
	if got, _ := os.ReadFile(victim); string(got) != "mine\n" {
		t.Errorf("the link's target now holds %q", got)
	}
}
