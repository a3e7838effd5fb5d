package main

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

func TestDenseFlagsRefusedNamingTheFlag(t *testing.T) {
	testassets.RequireORT(t)
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
	testassets.RequireORT(t)
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
