package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

// Fine-tuning the person model over the memory limit ends in one clear
// error naming the limit and where it comes from, with a non-zero exit
// code, instead of Go's "fatal error: out of memory" and a goroutine dump:
// under $SEGTUNE_MAX_MEMORY, and under an address-space limit (prlimit
// --as), which the default limit now follows.
func TestFinetuneOverTheMemoryLimitIsOneClearError(t *testing.T) {
	if testing.Short() {
		t.Skip("builds segtune: skipped in -short mode")
	}
	model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	data := testassets.Require(t, "data", "camvid")
	bin := segtuneBinary(t)
	finetune := func(t *testing.T, env []string, prefix ...string) {
		t.Helper()
		args := append(prefix, bin, "finetune", "--model", model, "--data", data, "--out", filepath.Join(t.TempDir(), "run"),
			"--label-map", "9,10:1;11:255;*:0", "--crop", "240x320", "--batch", "4", "--steps", "3")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
		}
		var refusals []string
		for _, line := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(line, "more than the memory limit") {
				refusals = append(refusals, line)
			}
		}
		if len(refusals) != 1 || strings.Contains(stderr.String(), "goroutine") || strings.Contains(stderr.String(), "fatal error") {
			t.Fatalf("want one refusal line and no runtime dump; stderr:\n%s", stderr.String())
		}
		t.Log(refusals[0])
	}
	t.Run("SEGTUNE_MAX_MEMORY", func(t *testing.T) {
		finetune(t, []string{"SEGTUNE_MAX_MEMORY=512M"})
	})
	t.Run("prlimit --as", func(t *testing.T) {
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			testassets.SkipOrFail(t, "no prlimit tool (util-linux): %v", err)
		}
		finetune(t, []string{"SEGTUNE_MAX_MEMORY="}, prlimit, "--as=4294967296")
	})
}
