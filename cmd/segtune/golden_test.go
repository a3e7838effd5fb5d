package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/runtime"
)

// The golden test holds what segtune says to a user: every command's
// --help, and the message for a bad value of every flag that takes one.
// Reshaping how flags are declared and how errors are named must leave
// these bytes alone; `go test -run TestGolden ./cmd/segtune -update`
// rewrites them where a message is meant to change.

var updateGolden = flag.Bool("update", false, "rewrite cmd/segtune/testdata/golden")

// goldenBase are the least arguments each command needs to reach its flag
// checks: a model that does not exist, a folder of one image, an output
// that can be made, a small data set (synthData). A probed flag replaces its entry here.
func goldenBase(path string) [][2]string {
	model := [2]string{"model", "$TMP/none.onnx"}
	switch path {
	case "segment":
		return [][2]string{model, {"input", "$TMP/in"}, {"output", "$TMP/out"}}
	case "serve", "doctor":
		return [][2]string{model}
	case "eval":
		return [][2]string{model, {"images", "$TMP/in"}, {"masks", "$TMP/in"}}
	case "finetune":
		return [][2]string{model, {"data", "$TMP/synth"}, {"out", "$TMP/run"}}
	case "export":
		return [][2]string{{"checkpoint", "$TMP/none.ckpt"}, {"out", "$TMP/out.onnx"}}
	case "artifacts":
		return [][2]string{model, {"out", "$TMP/art"}}
	case "data check", "data convert":
		return [][2]string{{"data", "$TMP/synth"}, {"out", "$TMP/conv"}}
	case "model new", "data synth", "demo":
		return [][2]string{{"out", "$TMP/file/new"}} // under a file: nothing is written
	}
	return nil
}

// badStrings are the bad values of string flags, by name; other string
// flags get "nosuch".
var badStrings = map[string]string{
	"size": "12xq", "crop": "12xq", "tile": "12xq", "val-tile": "12xq",
	"model": "$TMP/none.onnx", "checkpoint": "$TMP/none.ckpt",
	"input": "$TMP/none", "images": "$TMP/none", "masks": "$TMP/none", "data": "$TMP/none",
	"train-images": "$TMP/none", "train-masks": "$TMP/none", "val-images": "$TMP/none", "val-masks": "$TMP/none",
	"check-images": "$TMP/none", "check-masks": "$TMP/none", "calibrate": "$TMP/none",
	"output": "$TMP/file/out", "out": "$TMP/file/out", "confusion": "$TMP/file/c.csv",
	"partial": "$TMP/none.json", "config": "$TMP/none.yaml", "coco-crowd": "maybe",
	"label-map": "1:x", "mask-palette": "zz", "class-names": ",", "shard": "3/2",
	"addr": "nohost:x", "size-classes": "x", "class-weights": "x", "cuda-opt": "x",
	"keep-float": "NoSuchOp", "max-memory": "lots", "ort-lib": "$TMP/none.so",
	"mean": "x", "std": "x", "grid": "x", "size-bins": "x", "input-name": "x",
}

// libraryRanges are the ranges of the flags whose library checks them
// (no longer flagRanges), for the probes of their flags.
func libraryRanges() map[string]setting.Range {
	ranges := map[string]setting.Range{
		"threads":       runtime.ThreadsRange(),
		"overlay-alpha": imageio.OverlayAlphaRange,
		"scale":         imageio.ScaleFactorRange,
		"multiple-of":   imageio.MultipleOfRange,
		"value-scale":   imageio.FiniteRange,
		"value-offset":  imageio.FiniteRange,
		"mean":          imageio.MeanRange,
		"std":           imageio.StdRange,
		// export's, checked by deploy.Settings
		"calibrate-count": deploy.CountRange, "check-count": deploy.CountRange,
		"percentile": deploy.PercentileRange, "min-agreement": deploy.MinAgreementRange,
	}
	for _, lib := range []map[string]setting.Range{finetune.Ranges, dual.Ranges} {
		for key, r := range lib {
			ranges[flagOf(key)[2:]] = r
		}
	}
	return ranges
}

// goldenProbes are the bad values tried for flag f of command path: one
// that does not parse or is malformed, and for a number one out of its
// range (flagRanges) or, without a range, a negative one.
func goldenProbes(path string, f cli.Flag) []string {
	name := f.Names()[0]
	r, ranged := flagRanges()[name]
	if lr, ok := libraryRanges()[name]; ok {
		r, ranged = lr, true
	}
	if cr, ok := commandRanges[path+" "+name]; ok {
		r, ranged = cr, true
	}
	outOfRange := "-1"
	if ranged {
		switch {
		case math.IsInf(r.Min, -1):
			outOfRange = "NaN"
		case r.MinOpen || r.Min != 0 || !r.Zero:
			outOfRange = strconv.FormatFloat(r.Min-1, 'g', -1, 64)
			if r.MinOpen && r.Min == 0 {
				outOfRange = "0"
			}
		default:
			outOfRange = strconv.FormatFloat(r.Max+1, 'g', -1, 64)
		}
	}
	switch f.(type) {
	case *cli.BoolFlag:
		return nil
	case *cli.IntFlag, *cli.Int64Flag, *cli.Float64Flag:
		return []string{"x", outOfRange}
	case *cli.Uint64Flag:
		return []string{"x", "-1"}
	case *cli.DurationFlag:
		return []string{"x", "-1s"}
	}
	if ranged && r.List {
		return []string{"x", outOfRange}
	}
	if v, ok := badStrings[name]; ok {
		return []string{v}
	}
	return []string{"nosuch"}
}

// goldenRun runs segtune with args in dir and returns what it printed,
// its error and its exit status, with dir written as $TMP.
func goldenRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = out, out
	app := newApp()
	app.Writer, app.ErrWriter = out, out
	runErr := cliflag.Run(app, append([]string{"segtune"}, args...))
	os.Stdout, os.Stderr = stdout, stderr
	printed, _ := os.ReadFile(out.Name())
	var b strings.Builder
	fmt.Fprintf(&b, "$ segtune %s\n%s", strings.Join(args, " "), printed)
	if runErr != nil {
		code := 1
		var exit cli.ExitCoder
		if errors.As(runErr, &exit) {
			code = exit.ExitCode()
		}
		fmt.Fprintf(&b, "exit %d: %s\n", code, runErr)
	}
	return strings.ReplaceAll(b.String(), dir, "$TMP") + "\n"
}

// goldenCommands are the paths of every command and subcommand, sorted.
func goldenCommands(cmds []*cli.Command, prefix string, into map[string]*cli.Command) {
	for _, c := range cmds {
		path := strings.TrimSpace(prefix + " " + c.Name)
		into[path] = c
		goldenCommands(c.Subcommands, path, into)
	}
}

func TestGolden(t *testing.T) {
	for _, env := range []string{"ONNXRUNTIME_SHARED_LIBRARY_PATH", "SEGTUNE_MAX_MEMORY"} {
		t.Setenv(env, "")
		os.Unsetenv(env)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	imageFolder(t, dir, 8, 6)
	synthData(t, dir, 2, 1)
	os.WriteFile(filepath.Join(dir, "file"), []byte("a file, not a folder"), 0o644)
	sub := func(s string) string { return strings.ReplaceAll(s, "$TMP", dir) }

	cmds := map[string]*cli.Command{}
	goldenCommands(newApp().Commands, "", cmds)
	paths := []string{""}
	for p := range cmds {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	for _, path := range paths {
		name := strings.ReplaceAll(path, " ", "_")
		if name == "" {
			name = "segtune"
		}
		var words []string
		if path != "" {
			words = strings.Fields(path)
		}
		var b strings.Builder
		b.WriteString(goldenRun(t, dir, append(words, "--help")...))
		var flags []cli.Flag
		if path == "" {
			flags = newApp().Flags
		} else {
			flags = cmds[path].Flags
		}
		for _, f := range flags {
			fname := f.Names()[0]
			for _, bad := range goldenProbes(path, f) {
				var args []string
				if path == "" { // the app's flags: before a command that does little
					args = []string{"--" + fname, sub(bad), "version"}
				} else {
					args = append([]string{"--quiet"}, words...)
					for _, kv := range goldenBase(path) {
						if kv[0] != fname && hasFlag(flags, kv[0]) {
							args = append(args, "--"+kv[0], sub(kv[1]))
						}
					}
					args = append(args, "--"+fname, sub(bad))
				}
				got := goldenRun(t, dir, args...)
				if path == "doctor" || path == "" { // reports of this machine and its ONNX Runtime (loaded or not by earlier tests): only the error is the CLI's
					got = goldenErrorOnly(got)
				}
				if fname == "threads" { // its bound follows the machine's cores
					got = strings.ReplaceAll(got, " "+strconv.Itoa(runtime.MaxThreads()), " MAXTHREADS")
				}
				b.WriteString(got)
			}
		}
		file := filepath.Join(goldenDir(t), name+".golden")
		if *updateGolden {
			if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (go test -run TestGolden ./cmd/segtune -update writes it)", err)
		}
		if b.String() != string(want) {
			t.Errorf("segtune %s: help or flag errors differ from %s:\n%s", path, file, firstDiff(string(want), b.String()))
		}
	}
}

// goldenErrorOnly is run's command and error lines, without what it
// printed.
func goldenErrorOnly(run string) string {
	var keep []string
	for _, l := range strings.Split(run, "\n") {
		if strings.HasPrefix(l, "$ ") || strings.HasPrefix(l, "exit ") || l == "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// hasFlag says whether flags hold one named name.
func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		if f.Names()[0] == name {
			return true
		}
	}
	return false
}

// goldenDir is testdata/golden beside this test.
func goldenDir(t *testing.T) string {
	t.Helper()
	wd, err := filepath.Abs(filepath.Join(goldenSrc, "testdata", "golden"))
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// goldenSrc is the package folder, taken before the test changes folder.
var goldenSrc = func() string { wd, _ := os.Getwd(); return wd }()

// firstDiff shows the first line where got differs from want.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d\nwant: %s\n got: %s", i+1, wl, gl)
		}
	}
	return ""
}
