package runtime

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runInstaller runs scripts/install-ort.sh with args, a private cache and a
// PATH whose npm is the given shell script ("" for no npm at all).
func runInstaller(t *testing.T, cache, npm string, args ...string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	for _, tool := range []string{"bash", "sha256sum", "cut", "tar", "mktemp", "mkdir", "cp", "mv", "rm", "uname", "gzip"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not installed", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	if npm != "" {
		if err := os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/bash\n"+npm), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", append([]string{"../scripts/install-ort.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir(), "SEGTUNE_CACHE_DIR=" + cache}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestInstallCUDAAlreadyInstalledIsOffline(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "onnxruntime-cuda", CUDAORTVersion)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"libonnxruntime.so.1", "libonnxruntime_providers_cuda.so", "libonnxruntime_providers_shared.so"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runInstaller(t, cache, "", "--cuda") // no npm: must not be needed
	if err != nil {
		t.Fatalf("installer: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got, want := lines[len(lines)-1], filepath.Join(dir, "libonnxruntime.so.1"); got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	if got := CachedCUDALibraryPath(); !strings.HasSuffix(got, filepath.Join("onnxruntime-cuda", CUDAORTVersion, "libonnxruntime.so.1")) {
		t.Errorf("CachedCUDALibraryPath() = %q", got)
	}
}

func TestInstallCUDARejectsBadChecksum(t *testing.T) {
	cache := t.TempDir()
	// A fake npm whose pack writes a tarball that is not the real one.
	fake := `pkg=${@: -1}; name=${pkg%@*}; ver=${pkg##*@}; echo tampered > "$name-$ver.tgz"; echo "$name-$ver.tgz"`
	out, err := runInstaller(t, cache, fake, "--cuda")
	if err == nil {
		t.Fatalf("installer accepted a tampered tarball:\n%s", out)
	}
	if !strings.Contains(out, "checksum mismatch for onnxruntime-node@1.29.0") {
		t.Errorf("no checksum message:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(cache, "onnxruntime-cuda", CUDAORTVersion, "libonnxruntime.so.1")); err == nil {
		t.Error("a library was installed from a tampered tarball")
	}
}

func TestInstallCUDAWithoutNPM(t *testing.T) {
	out, err := runInstaller(t, t.TempDir(), "", "--cuda")
	if err == nil || !strings.Contains(out, "npm is not installed") {
		t.Fatalf("want a clear npm message, got err=%v:\n%s", err, out)
	}
}
