package main

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func TestDenseFlagsRefusedNamingTheFlag(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 40, 30)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--tile", "0x5"}, "--tile"},
		{[]string{"--tile", "5x"}, "--tile"},
		{[]string{"--tile", "40000x512"}, "--tile"},
		{[]string{"--tile", "64", "--overlap", "1"}, "--overlap"},
		{[]string{"--tile", "64", "--overlap", "-0.5"}, "--overlap"},
		{[]string{"--overlap", "0.5"}, "--overlap"},
		{[]string{"--tta", "flop"}, "--tta"},
		{[]string{"--tta", "flip,scales=0.5,x"}, "--tta"},
		{[]string{"--tta", "scales=0"}, "--tta"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"segment", "--model", model, "--input", in, "--output", out}, tc.flags...)
		_, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.flags, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(out, "a.png")); err == nil {
			t.Errorf("%v: a mask was written", tc.flags)
		}
	}
}

// A 6000×4000 image segmented with --tile 512x512 at under 1 GiB peak RSS
// of the segtune process. (--max-memory 4G lets the decoder take the image
// and its float tensor, 366 MiB, which an eighth of 1G would refuse.)
func TestTiledSegmentOfALargeImageStaysUnderOneGiB(t *testing.T) {
	if testing.Short() {
		t.Skip("builds segtune and segments a 24-megapixel image: skipped in -short mode")
	}
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := filepath.Join(dir, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	const w, h = 6000, 4000
	writeImage(t, filepath.Join(in, "big.png"), w, h)
	bin := segtuneBinary(t)
	segment := func(out string, flags ...string) (string, int64, error) {
		args := append([]string{"--max-memory", "4G", "segment", "--model", model, "--input", in, "--output", out, "--resize", "none"}, flags...)
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		if !ok {
			t.Fatal("no rusage for the child")
		}
		return stderr.String(), ru.Maxrss * 1024, err // kilobytes on Linux
	}
	out := filepath.Join(dir, "tiled")
	stderr, rss, err := segment(out, "--tile", "512x512", "--overlap", "0.25", "--threads", "2")
	if err != nil {
		t.Fatalf("tiled: %v\n%s", err, stderr)
	}
	t.Logf("peak RSS of segment --tile 512x512 on %dx%d: %.0f MiB", w, h, float64(rss)/(1<<20))
	if rss >= 1<<30 {
		t.Errorf("peak RSS %d bytes, want under 1 GiB", rss)
	}
	f, err := os.Open(filepath.Join(out, "big.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mask, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := mask.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("mask %v, want %dx%d", b, w, h)
	}
	pal, ok := mask.(*image.Paletted)
	if !ok {
		t.Fatalf("mask is a %T, want a palette PNG", mask)
	}
	// writeImage's left half is red (class 1), its right half green (0).
	for _, p := range [][2]int{{0, 0}, {w/2 - 1, h - 1}, {w / 2, 0}, {w - 1, h/2 + 7}, {511, 383}} {
		want := uint8(0)
		if p[0] < w/2 {
			want = 1
		}
		if got := pal.ColorIndexAt(p[0], p[1]); got != want {
			t.Errorf("mask at %v: class %d, want %d", p, got, want)
		}
	}
}

// finetune's --val-tile/--val-tta validate through the dense inference
// path. The model is a 1×1 Conv, so every window and its mirror see the
// same per-pixel scores: with a tile as large as the image, tiles smaller
// than it, or flip TTA, the validation mIoU and loss are those of the
// whole-image run; scales=0.5 (scores resized down and up) changes the
// loss, which shows the dense path ran.
func TestFinetuneDenseValidation(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 8, 4)
	model := redModel(t, dir)
	train := func(name string, flags ...string) (string, []history.Record) {
		t.Helper()
		out := filepath.Join(dir, name)
		args := append([]string{"finetune", "--model", model, "--data", data, "--out", out, "--label-map", "1,2:1;*:0",
			"--crop", "32x32", "--batch", "4", "--epochs", "2", "--lr", "1e-2", "--seed", "7", "--threads", "1"}, flags...)
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%v: %v", flags, err)
		}
		recs, err := history.Read(filepath.Join(out, finetune.HistoryFile))
		if err != nil {
			t.Fatal(err)
		}
		return out, history.Filter(recs, history.KindEpoch)
	}
	_, plain := train("plain")
	if len(plain) != 2 {
		t.Fatalf("%d epoch records, want 2", len(plain))
	}
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*max(1, math.Abs(b)) }
	for _, tc := range []struct {
		name  string
		flags []string
		same  bool
	}{
		{"tile-larger", []string{"--val-tile", "64x64"}, true},
		{"tile-smaller", []string{"--val-tile", "16x12", "--val-overlap", "0.5"}, true},
		{"flip", []string{"--val-tta", "flip"}, true},
		{"half-scale", []string{"--val-tta", "scales=0.5"}, false},
	} {
		_, got := train(tc.name, tc.flags...)
		if len(got) != len(plain) {
			t.Fatalf("%s: %d epoch records, want %d", tc.name, len(got), len(plain))
		}
		for e := range plain {
			for _, key := range []string{"val_miou", "val_loss"} {
				v, ok := got[e].Extra[key]
				if !ok {
					t.Fatalf("%s: epoch %d reports no %s: %v", tc.name, e, key, got[e].Extra)
				}
				want := plain[e].Extra[key]
				if key == "val_miou" && !tc.same {
					continue // a blur of the scores may keep every label
				}
				if close(v, want) != tc.same {
					t.Errorf("%s: epoch %d %s %v, whole images %v; want the same: %v", tc.name, e, key, v, want, tc.same)
				}
			}
		}
	}
}

// --val-* values are refused naming the flag before the run starts; a
// resume may not change them; a run's config.json repeats them.
func TestFinetuneDenseValidationSettings(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 4, 2)
	model := redModel(t, dir)
	base := func(out string) []string {
		return []string{"finetune", "--model", model, "--data", data, "--out", out, "--label-map", "1,2:1;*:0",
			"--crop", "32x32", "--batch", "2", "--epochs", "1", "--seed", "3", "--threads", "1"}
	}
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--val-tile", "0x5"}, "--val-tile"},
		{[]string{"--val-tile", "16x16", "--val-overlap", "1"}, "--val-overlap"},
		{[]string{"--val-tta", "bogus"}, "--val-tta"},
		{[]string{"--val-overlap", "0.5"}, "--val-overlap"},
	} {
		out := filepath.Join(t.TempDir(), "run")
		_, err := runCLI(t, append(base(out), tc.flags...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.flags, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(out, finetune.HistoryFile)); err == nil {
			t.Errorf("%v: the run started", tc.flags)
		}
	}

	fixed := filepath.Join(t.TempDir(), "run")
	_, err := runCLI(t, "finetune", "--model", fixedRedModel(t, dir, "fixed.onnx", 0, 32, 32), "--data", data, "--out", fixed,
		"--label-map", "1,2:1;*:0", "--crop", "32x32", "--batch", "2", "--epochs", "1", "--threads", "1", "--val-tile", "16x16")
	if err == nil || !strings.Contains(err.Error(), "fixed 32x32") || !strings.Contains(err.Error(), "--val-tile/--val-tta: ") {
		t.Errorf("--val-tile with a model of a fixed input size: %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(fixed, finetune.HistoryFile)); err == nil {
		t.Error("--val-tile with a model of a fixed input size: the run started")
	}

	first := filepath.Join(dir, "first")
	if _, err := runCLI(t, append(base(first), "--val-tile", "16x16", "--val-overlap", "0.5", "--val-tta", "flip")...); err != nil {
		t.Fatal(err)
	}
	want := inference.Dense{TileHeight: 16, TileWidth: 16, Overlap: 0.5, Flip: true}
	if got := readRunConfig(t, first).ValDense; got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("config.json records validation %v, want %v", got, want)
	}
	again := filepath.Join(dir, "again")
	if _, err := runCLI(t, "finetune", "--config", filepath.Join(first, "config.json"), "--out", again); err != nil {
		t.Fatal(err)
	}
	if a, b := readRunConfig(t, first), readRunConfig(t, again); !reflect.DeepEqual(a, b) {
		t.Errorf("the repeated run's configuration differs:\n%+v\n%+v", a, b)
	}
	_, err = runCLI(t, "finetune", "--out", first, "--resume", "--epochs", "2", "--val-tile", "8x8")
	if err == nil || !strings.Contains(err.Error(), "--val-tile (the run has tile 16x16, overlap 0.5, flip)") {
		t.Errorf("a resume changing --val-tile: %v, want it refused naming the flag and the run's setting", err)
	}
	if _, err := runCLI(t, "finetune", "--out", first, "--resume", "--epochs", "2", "--val-tile", "16x16", "--val-overlap", "0.5", "--val-tta", "flip"); err != nil {
		t.Errorf("a resume repeating the --val-* flags: %v", err)
	}
}
