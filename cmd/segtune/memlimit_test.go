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
	finetune := func(t *testing.T, env []string, refusal string, prefix []string, flags ...string) {
		t.Helper()
		args := append(prefix, bin, "finetune", "--model", model, "--data", data, "--out", filepath.Join(t.TempDir(), "run"),
			"--label-map", "9,10:1;11:255;*:0", "--steps", "3")
		args = append(args, flags...)
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
			if strings.Contains(line, refusal) {
				refusals = append(refusals, line)
			}
		}
		if len(refusals) != 1 || strings.Contains(stderr.String(), "goroutine") || strings.Contains(stderr.String(), "fatal error") {
			t.Fatalf("want one refusal line and no runtime dump; stderr:\n%s", stderr.String())
		}
		t.Log(refusals[0])
	}
	readme := []string{"--crop", "240x320", "--batch", "4"}
	t.Run("SEGTUNE_MAX_MEMORY", func(t *testing.T) {
		finetune(t, []string{"SEGTUNE_MAX_MEMORY=512M"}, "more than the memory limit", nil, readme...)
	})
	prlimit := func(t *testing.T) string {
		p, err := exec.LookPath("prlimit")
		if err != nil {
			testassets.SkipOrFail(t, "no prlimit tool (util-linux): %v", err)
		}
		return p
	}
	t.Run("prlimit --as", func(t *testing.T) {
		finetune(t, []string{"SEGTUNE_MAX_MEMORY="}, "more than the memory limit", []string{prlimit(t), "--as=4294967296"}, readme...)
	})
	// Within the memory limit, batches of 3 on 16 threads would map more
	// than 4 GB of address space (the threads' stacks, ONNX Runtime's and
	// Go's reservations); Go's runtime used to die of it mid-run.
	t.Run("prlimit --as, 16 threads", func(t *testing.T) {
		finetune(t, []string{"SEGTUNE_MAX_MEMORY=3G"}, "more than the address-space limit", []string{prlimit(t), "--as=4000000000"},
			"--batch", "3", "--threads", "16")
	})
}
