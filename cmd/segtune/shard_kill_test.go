package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// segtuneBinary builds the ordinary segtune binary for tests that must run
// it as a separate process (to kill it).
func segtuneBinary(t *testing.T) string {
	t.Helper()
	return buildSegtune(t, "segtune")
}

// buildSegtune builds this command, with the build tags given, into a
// temporary file called name and returns its path.
func buildSegtune(t *testing.T, name string, tags ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its own go first on PATH
	if err != nil {
		t.Fatalf("building segtune: %v", err)
	}
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"build"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if out, err := exec.Command(goBin, append(args, "-o", bin, ".")...).CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// processFixture is the setup of the tests that run segtune as separate
// processes: n images and masks (shardData), the red model, the masks one
// in-process run writes (in one) and a segtune binary.
func processFixture(t *testing.T, n int) (dir, bin, model, in, maskDir, one string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds segtune: skipped in -short mode")
	}
	runtimetest.Require(t)
	clearShardEnv(t)
	dir = t.TempDir()
	model = redModel(t, dir)
	in, maskDir = shardData(t, dir, n)
	one = filepath.Join(dir, "one")
	if s := segmentJSON(t, "--model", model, "--input", in, "--output", one); s.Succeeded != n {
		t.Fatalf("one process: %+v", s)
	}
	return dir, segtuneBinary(t), model, in, maskDir, one
}

// A shard worker killed (SIGKILL) in the middle of its images and then run
// again completes the set: the masks equal one process's, every image has
// exactly one, and no temporary file is left.
func TestKilledShardRerunCompletesTheSet(t *testing.T) {
	const n = 240
	dir, bin, model, in, _, one := processFixture(t, n)
	three := filepath.Join(dir, "three")
	args := []string{"segment", "--model", model, "--input", in, "--output", three, "--threads", "1", "--batch", "1"}
	run := func(k int) {
		if out, err := exec.Command(bin, append(args, "--shard", fmt.Sprintf("%d/3", k))...).CombinedOutput(); err != nil {
			t.Fatalf("shard %d: %v\n%s", k, err, out)
		}
	}
	run(0)
	run(2)

	// Shard 1 is killed once it has written a few masks.
	cmd := exec.Command(bin, append(args, "--shard", "1/3")...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	before := len(masks(t, three))
	deadline := time.Now().Add(2 * time.Minute)
	for len(masks(t, three)) < before+3 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	killedAt := len(masks(t, three))
	if killedAt >= n {
		t.Fatalf("shard 1 finished (%d masks) before it could be killed", killedAt)
	}
	t.Logf("killed shard 1 with %d of %d masks written", killedAt, n)

	run(1)
	got := folderBytes(t, three)
	sameFolders(t, folderBytes(t, one), got, "after the killed shard's rerun")
	entries, err := os.ReadDir(three)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if atomicfile.IsTemp(e.Name()) {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// masks lists the finished masks in dir.
func masks(t *testing.T, dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".png") && !atomicfile.IsTemp(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// The Slurm array script of docs/parallel, run as three array tasks would
// run it (Slurm's variables set, no sbatch), writes every mask once and
// partials that eval merge turns into the one-process report.
func TestSlurmArrayScript(t *testing.T) {
	dir, bin, model, in, ms, one := processFixture(t, 12)
	want := evalJSON(t, "eval", "--model", model, "--images", in, "--masks", ms)
	script, err := filepath.Abs("../../docs/parallel/segment-slurm-array.sh")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	for k := 0; k < 3; k++ {
		cmd := exec.Command("bash", script)
		cmd.Env = append(os.Environ(), "SEGTUNE="+bin, "MODEL="+model, "IMAGES="+in, "MASKS="+ms, "OUT="+out,
			"LABEL_MAP=*:keep", "SLURM_CPUS_PER_TASK=1",
			fmt.Sprintf("SLURM_ARRAY_TASK_ID=%d", 4+k), "SLURM_ARRAY_TASK_MIN=4", "SLURM_ARRAY_TASK_COUNT=3")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("task %d: %v\n%s", k, err, b)
		}
	}
	sameFolders(t, folderBytes(t, one), folderBytes(t, filepath.Join(out, "masks")), "the array's masks")
	partials, _ := filepath.Glob(filepath.Join(out, "partials", "shard-*.json"))
	if len(partials) != 3 {
		t.Fatalf("partials %v, want 3", partials)
	}
	if got := evalJSON(t, append([]string{"eval", "merge"}, partials...)...); got != want {
		t.Errorf("merged report\n%s\nwant\n%s", got, want)
	}
}
