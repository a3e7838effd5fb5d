package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// finetune --conv-grad: a value that is no set of convolution classes,
// or any class on --device cpu (ConvGrad's CPU kernel is for checks), is
// refused naming the flag before the run; --device auto on a machine
// without a GPU says in one line that it trains without, and trains.
func TestFinetuneConvGradFlag(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 2, 1)
	model := redModel(t, dir)
	for _, tc := range []struct{ args, want string }{
		{"--conv-grad winograd", `--conv-grad winograd: convolution class "winograd": want all, none`},
		{"--conv-grad all --device cpu", `--conv-grad all: needs a GPU`},
	} {
		out := filepath.Join(dir, "refused")
		args := append([]string{"finetune", "--model", model, "--data", data, "--out", out, "--steps", "1"}, strings.Fields(tc.args)...)
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: %s was made for a run that could not start", tc.args, out)
		}
	}
	log, err := runCLIStderr(t, "finetune", "--model", model, "--data", data, "--out", filepath.Join(dir, "auto"), "--steps", "1",
		"--label-map", "1,2:1;*:0", "--batch", "1", "--crop", "16x16", "--device", "auto", "--conv-grad", "all")
	if err != nil {
		t.Fatal(err)
	}
	if _, noGPU := runtime.CUDADevices(); noGPU != nil && !strings.Contains(log, "segtune: --conv-grad all: no CUDA GPU here") {
		t.Errorf("--device auto without a GPU: stderr lacks the --conv-grad line:\n%s", log)
	}
}
