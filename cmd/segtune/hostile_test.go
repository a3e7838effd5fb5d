package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// runCLIWithin runs segtune and fails the test if it has not returned
// within d (a FIFO used to block it forever).
func runCLIWithin(t *testing.T, d time.Duration, args ...string) (string, error) {
	t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runCLI(t, args...)
		done <- result{out, err}
	}()
	select {
	case r := <-done:
		return r.out, r.err
	case <-time.After(d):
		t.Fatalf("segtune %s did not return within %v", strings.Join(args, " "), d)
		return "", nil
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// Defect: a model, sidecar, --preprocess file, checkpoint or image that is a
// FIFO blocked the program forever.
func TestFIFOInputsAreRefused(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	in := imageFolder(t, dir, 20, 10)

	fifoModel := filepath.Join(dir, "fifo.onnx")
	mkfifo(t, fifoModel)
	if _, err := runCLIWithin(t, 20*time.Second, "segment", "--model", fifoModel, "--input", in, "--output", filepath.Join(dir, "o1")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO model: err = %v", err)
	}

	sub := filepath.Join(dir, "side")
	os.Mkdir(sub, 0o755)
	model := redModel(t, sub)
	mkfifo(t, filepath.Join(sub, strings.TrimSuffix(filepath.Base(model), ".onnx")+".segtune.json"))
	if _, err := runCLIWithin(t, 20*time.Second, "segment", "--model", model, "--input", in, "--output", filepath.Join(dir, "o2")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO sidecar: err = %v", err)
	}

	model = redModel(t, dir)
	pre := filepath.Join(dir, "pre.json")
	mkfifo(t, pre)
	if _, err := runCLIWithin(t, 20*time.Second, "segment", "--model", model, "--preprocess", pre, "--input", in, "--output", filepath.Join(dir, "o3")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO --preprocess: err = %v", err)
	}

	ck := filepath.Join(dir, "fifo.ckpt")
	mkfifo(t, ck)
	if _, err := runCLIWithin(t, 20*time.Second, "export", "--checkpoint", ck, "--out", filepath.Join(dir, "x.onnx")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO checkpoint: err = %v", err)
	}

	// A FIFO among the images is reported by name and skipped.
	mkfifo(t, filepath.Join(in, "pipe.png"))
	out := filepath.Join(dir, "o4")
	if _, err := runCLIWithin(t, 20*time.Second, "segment", "--model", model, "--input", in, "--output", out); err != nil && !strings.Contains(err.Error(), "1 of 2 images failed") {
		t.Errorf("FIFO image: err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "a.png")); err != nil {
		t.Errorf("the regular image was not segmented: %v", err)
	}
}

// Defect: a sidecar symlinked to /dev/zero was read without limit.
func TestSidecarFromDevZeroIsRefused(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	in := imageFolder(t, dir, 20, 10)
	model := redModel(t, dir)
	pre := filepath.Join(dir, "pre.json")
	os.Symlink("/dev/zero", pre)
	if _, err := runCLIWithin(t, 20*time.Second, "segment", "--model", model, "--preprocess", pre, "--input", in, "--output", filepath.Join(dir, "o")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero --preprocess: err = %v", err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte(`{"version": 1, "classes": ["`+strings.Repeat("x", 2<<20)+`"]}`), 0o644)
	if _, err := runCLIWithin(t, 20*time.Second, "segment", "--model", model, "--preprocess", big, "--input", in, "--output", filepath.Join(dir, "o")); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("2 MiB --preprocess: err = %v", err)
	}
}

// Defect: segment --output equal to (or inside) --input overwrote the
// source images.
func TestSegmentRefusesOverlappingFolders(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 20, 10)
	img := filepath.Join(in, "a.png")
	before, _ := os.ReadFile(img)
	link := filepath.Join(dir, "link")
	os.Symlink(in, link)
	outWithLink := filepath.Join(dir, "out2")
	os.Mkdir(outWithLink, 0o755)
	os.Symlink(img, filepath.Join(outWithLink, "a.png")) // OUT/a.png leads to the input
	cases := [][]string{
		{"--input", in, "--output", in},
		{"--input", in, "--output", link},
		{"--input", link, "--output", filepath.Join(in, "masks")},
		{"--input", in, "--output", outWithLink},
		{"--input", filepath.Join(dir, "o3", "overlays"), "--output", filepath.Join(dir, "o3"), "--overlay"},
	}
	os.MkdirAll(filepath.Join(dir, "o3", "overlays"), 0o755)
	writeImage(t, filepath.Join(dir, "o3", "overlays", "c.png"), 20, 10)
	for _, args := range cases {
		_, err := runCLI(t, append([]string{"segment", "--model", model}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "choose") {
			t.Errorf("%v: err = %v", args, err)
		}
	}
	if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
		t.Fatal("the input image was overwritten")
	}
	// Output beside the input is fine.
	if _, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
}

// Defect: hidden temporary files left by a killed segment were never
// removed.
func TestSegmentRemovesStaleTemporaries(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 20, 10)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	stale := filepath.Join(out, ".a.png.tmp-99999999-42") // from a process that no longer runs
	os.WriteFile(stale, []byte("half a PNG"), 0o644)
	mine := filepath.Join(out, "notes.tmp-1")
	os.WriteFile(mine, nil, 0o644)
	if _, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("stale temporary file left in place")
	}
	if _, err := os.Stat(mine); err != nil {
		t.Error("a user's file was removed")
	}
}

// Defect: numeric flags were not validated: --threads 100000 crashed ONNX
// Runtime, --batch 0 became 1 silently, NaN passed everywhere.
func TestNumericFlagsAreValidated(t *testing.T) {
	dir := t.TempDir()
	seg := []string{"segment", "--model", filepath.Join(dir, "m.onnx"), "--input", dir, "--output", filepath.Join(dir, "o")}
	ft := []string{"finetune", "--model", filepath.Join(dir, "m.onnx"), "--data", dir, "--out", filepath.Join(dir, "run")}
	ev := []string{"eval", "--model", filepath.Join(dir, "m.onnx"), "--images", dir, "--masks", dir}
	cases := []struct {
		args []string
		want string
	}{
		{append(seg, "--threads", "100000"), "--threads 100000: must be from 1 to"},
		{append(seg, "--threads", "-1"), "--threads -1"},
		{append(seg, "--batch", "0"), "--batch 0: must be from 1"},
		{append(seg, "--batch", "-1"), "--batch -1"},
		{append(seg, "--alpha", "1.5"), "--overlay-alpha 1.5"},
		{append(seg, "--scale", "nan"), "--scale: NaN"},
		{append(seg, "--value-scale", "inf"), "--value-scale +Inf"},
		{append(seg, "--mean", "0.5,nan,0.5"), "--mean: NaN"},
		{append(ft, "--dual-lr", "-5"), "--dual-lr -5: must be greater than 0"},
		{append(ft, "--beta", "0"), "--beta 0: must be in (0, 1]"},
		{append(ft, "--classes", "-1"), "--classes -1"},
		{append(ft, "--steps", "-5"), "--steps -5"},
		{append(ft, "--epochs", "0"), "--epochs 0: needs --steps"},
		{append(ft, "--ignore", "-5"), "--ignore -5"},
		{append(ft, "--ignore", "300"), "--ignore 300: must be from 1 to 255"}, // finetune's rule, not every mask label's
		{append(ft, "--size-threshold", "nan"), "--size-threshold: NaN"},
		{append(ft, "--lr", "nan"), "--lr: NaN"},
		{append(ft, "--lr", "0"), "--lr 0"},
		{append(ft, "--momentum", "2"), "--momentum 2"},
		{append(ft, "--grid", "0.1,nan"), "--grid: NaN"},
		{append(ev, "--size-threshold", "nan"), "--size-threshold: NaN"},
		{append(ev, "--batch", "0"), "--batch 0"},
		{[]string{"model", "new", "--out", filepath.Join(dir, "x.onnx"), "--classes", "0"}, "--classes 0: must be from 2"},
		{[]string{"model", "new", "--out", filepath.Join(dir, "x.onnx"), "--width", "nan"}, "--width: NaN"},
		// one rule a value, the library's: the CLI once let 4 < width ≤ 16 through to models' refusal
		{[]string{"model", "new", "--out", filepath.Join(dir, "x.onnx"), "--width", "5"}, "--width 5: must be in (0, 4]"},
		// data check's classes say what its 0 means, not finetune's
		{[]string{"data", "check", "--data", dir, "--classes", "-1"}, "--classes -1: must be from 1 to 65536, or 0 (0: the largest label seen + 1)"},
	}
	for _, tc := range cases {
		_, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", strings.Join(tc.args[len(tc.args)-2:], " "), err, tc.want)
		}
	}
}

// fixedRedModel is redModel with the given dims (0: dynamic) on its input.
func fixedRedModel(t *testing.T, dir, name string, n, h, w int64) string {
	t.Helper()
	m, err := onnx.Load(redModel(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	shape := m.Proto.Graph.Input[0].GetType().GetTensorType().GetShape()
	for i, v := range []int64{n, 3, h, w} {
		if v > 0 {
			shape.Dim[i].Value = &onnx.DimValue{DimValue: v}
		}
	}
	path := filepath.Join(dir, name)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Defect: a model declaring a huge fixed input, or --size 20000x20000,
// ended in Go's "fatal error: out of memory".
func TestDeclaredSizesOverTheMemoryLimitAreRefused(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	in := imageFolder(t, dir, 20, 10)
	out := filepath.Join(dir, "out")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"segment", "--model", fixedRedModel(t, dir, "big.onnx", 1, 30000, 30000)}, "input \"input\" declared [1 3 30000 30000]"},
		{[]string{"segment", "--model", fixedRedModel(t, dir, "batch.onnx", 1_000_000_000, 0, 0)}, "declared [1000000000 3"},
		{[]string{"segment", "--model", fixedRedModel(t, dir, "wide.onnx", 64, 4096, 4096)}, "declared [64 3 4096 4096]"},
		{[]string{"segment", "--model", redModel(t, dir), "--size", "20000x20000"}, "memory limit"},
		{[]string{"--max-memory", "64M", "segment", "--model", redModel(t, dir), "--size", "2000x2000"}, "(--max-memory)"},
		{[]string{"--max-memory", "64M", "segment", "--model", redModel(t, dir), "--batch", "64", "--scale", "40"}, "memory limit"},
	}
	for _, tc := range cases {
		_, err := runCLI(t, append(tc.args, "--input", in, "--output", out)...)
		if err == nil || !strings.Contains(err.Error(), "memory limit") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v", tc.args, err)
		}
	}
	// finetune refuses an impossible batch before reading data.
	_, err := runCLI(t, "finetune", "--model", redModel(t, dir), "--train-images", in, "--train-masks", in,
		"--out", filepath.Join(dir, "run"), "--batch", "64", "--crop", "4096x4096")
	if err == nil || !strings.Contains(err.Error(), "memory limit") || !strings.Contains(err.Error(), "--crop") {
		t.Errorf("finetune: err = %v", err)
	}
}

// Defect: a model with zero inputs must be refused, not run into constant
// masks.
func TestZeroInputModelIsRefused(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	m, err := onnx.Load(redModel(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	// The image input becomes an initializer: the model takes no data input.
	m.Proto.Graph.Initializer = append(m.Proto.Graph.Initializer, onnx.NewFloat32Tensor("input", []int64{1, 3, 4, 4}, make([]float32, 48)))
	with := filepath.Join(dir, "const.onnx")
	m.Save(with)
	m.Proto.Graph.Input = nil
	none := filepath.Join(dir, "none.onnx")
	m.Save(none)
	in := imageFolder(t, dir, 20, 10)
	for _, model := range []string{with, none} {
		_, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", filepath.Join(dir, "out"))
		if err == nil || !strings.Contains(err.Error(), "takes 0") {
			t.Errorf("segment %s: err = %v", filepath.Base(model), err)
		}
		_, err = runCLI(t, "eval", "--model", model, "--images", in, "--masks", in)
		if err == nil || !strings.Contains(err.Error(), "takes 0") {
			t.Errorf("eval %s: err = %v", filepath.Base(model), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "a.png")); err == nil {
		t.Error("a mask was written")
	}
}

// Defect: writes followed symbolic links out of the output folder: a mask
// name in segment's --output, or export's --out, that is a link to a file
// elsewhere replaced that file (as root, /etc/passwd). Now the link is
// refused, named, and its target left as it was.
func TestOutputsDoNotFollowSymlinks(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 20, 10)
	victim := filepath.Join(t.TempDir(), "victim.txt")
	os.WriteFile(victim, []byte("mine"), 0o644)
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	os.Symlink(victim, filepath.Join(out, "a.png"))
	mask := filepath.Join(out, "a.png")
	if _, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", out); err == nil || !strings.Contains(err.Error(), mask+" exists and was not written by segtune segment") {
		t.Errorf("segment with a link in its output folder: err = %v; want the link refused before any work, named", err)
	}
	stderr, err := runCLIStderr(t, "segment", "--model", model, "--input", in, "--output", out, "--overwrite")
	if err == nil || !strings.Contains(stderr, "symbolic link") {
		t.Errorf("segment --overwrite with a link in its output folder: err = %v, stderr %q; want the image failed, the link named", err, stderr)
	}
	link := filepath.Join(dir, "exported.onnx")
	os.Symlink(victim, link)
	if _, err := runCLI(t, "export", "--model", model, "--out", link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("export --out LINK: err = %v, want a refusal naming the link", err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "mine" {
		t.Fatalf("the link's target was overwritten: it holds %d bytes", len(got))
	}
}

// A flag that does not parse (a value that is not a number, a typo in a
// flag's name, a flag without its value) is one line naming the flag as
// typed, with exit status 2, and no help dumped on stdout before it.
func TestUsageErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"finetune", "--model", "m.onnx", "--lr", "abc"}, `invalid value "abc" for flag --lr: parse error (segtune finetune --help lists its flags)`},
		{[]string{"finetune", "--model", "m.onnx", "--epoch", "3"}, "flag provided but not defined: --epoch (segtune finetune --help lists its flags)"},
		{[]string{"data", "check", "--data", "d", "--classes", "two"}, `invalid value "two" for flag --classes: parse error (segtune data check --help lists its flags)`},
		{[]string{"segment", "--model"}, "flag needs an argument: --model (segtune segment --help lists its flags)"},
		{[]string{"--max-memory"}, "flag needs an argument: --max-memory (segtune --help lists its flags)"},
	} {
		stdout, err := runCLI(t, tc.args...)
		var exit cli.ExitCoder
		if err == nil || err.Error() != tc.want || !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: err = %v, want %q with status 2", tc.args, err, tc.want)
		}
		if stdout != "" {
			t.Errorf("%v printed %d bytes of help on stdout", tc.args, len(stdout))
		}
	}
}

// A --size that does not parse is named as --size (the sizes of a sidecar
// are named by the sidecar's path).
func TestSizeFlagIsNamed(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	in := imageFolder(t, dir, 20, 10)
	_, err := runCLI(t, "segment", "--model", redModel(t, dir), "--input", in, "--output", filepath.Join(dir, "o"), "--size", "512x")
	if want := `--size: size "512x": want HxW`; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
}
