package runtime

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/segtune/segtune/internal/testassets/skip"
)

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFindCUDALibrariesFakeFolders lays out the places CUDA libraries live —
// LD_LIBRARY_PATH, $CUDA_HOME/lib64, the pip wheels' nvidia/*/lib folders of
// a virtual environment on PATH — and checks what is found where, the search
// order, and the missing list.
func TestFindCUDALibrariesFakeFolders(t *testing.T) {
	root := t.TempDir()
	ld := filepath.Join(root, "ld")
	home := filepath.Join(root, "cuda")
	venv := filepath.Join(root, "venv")
	sp := filepath.Join(venv, "lib", "python3.12", "site-packages")
	touch(t, filepath.Join(venv, "bin", "python3"))
	touch(t, filepath.Join(ld, "libcublas.so.13"))
	touch(t, filepath.Join(home, "lib64", "libcublas.so.13")) // shadowed by LD_LIBRARY_PATH
	touch(t, filepath.Join(home, "lib64", "libcudart.so.13"))
	touch(t, filepath.Join(sp, "nvidia", "cu13", "lib", "libcublasLt.so.13"))
	touch(t, filepath.Join(sp, "nvidia", "cu13", "lib", "libcudart.so.13")) // shadowed by CUDA_HOME
	touch(t, filepath.Join(sp, "nvidia", "cudnn", "lib", "libcudnn.so.9"))
	touch(t, filepath.Join(sp, "nvidia", "cudnn", "lib", "libcudnn_graph.so.9"))
	env := map[string]string{
		"LD_LIBRARY_PATH": ld + ":" + filepath.Join(root, "absent"),
		"CUDA_HOME":       home,
		"PATH":            filepath.Join(venv, "bin") + ":/nonexistent",
	}
	getenv := func(k string) string { return env[k] }
	dirs := CUDASearchDirs(getenv, pythonPrefixes(getenv))
	want := []string{ld, filepath.Join(home, "lib64")}
	if len(dirs) < 4 || !reflect.DeepEqual(dirs[:2], want) {
		t.Fatalf("search dirs start %v, want %v", dirs, want)
	}
	idx := func(d string) int {
		for i, x := range dirs {
			if x == d {
				return i
			}
		}
		t.Fatalf("%s not searched: %v", d, dirs)
		return -1
	}
	if idx(filepath.Join(sp, "nvidia", "cu13", "lib")) < 2 || idx(filepath.Join(sp, "nvidia", "cudnn", "lib")) < 2 {
		t.Errorf("pip folders searched before CUDA_HOME: %v", dirs)
	}
	// Only the fake folders, so that the machine's own CUDA plays no part.
	var fake []string
	for _, d := range dirs {
		if strings.HasPrefix(d, root) {
			fake = append(fake, d)
		}
	}
	res := findCUDALibraries(fake)
	got := map[string]string{}
	for _, l := range res.Found() {
		got[l.Soname] = l.Path
	}
	wantFound := map[string]string{
		"libcublas.so.13":     filepath.Join(ld, "libcublas.so.13"),
		"libcudart.so.13":     filepath.Join(home, "lib64", "libcudart.so.13"),
		"libcublasLt.so.13":   filepath.Join(sp, "nvidia", "cu13", "lib", "libcublasLt.so.13"),
		"libcudnn.so.9":       filepath.Join(sp, "nvidia", "cudnn", "lib", "libcudnn.so.9"),
		"libcudnn_graph.so.9": filepath.Join(sp, "nvidia", "cudnn", "lib", "libcudnn_graph.so.9"),
	}
	if !reflect.DeepEqual(got, wantFound) {
		t.Errorf("found %v\nwant  %v", got, wantFound)
	}
	if m := res.Missing(); !reflect.DeepEqual(m, []string{"libcurand.so.10"}) {
		t.Errorf("missing %v, want [libcurand.so.10]", m)
	}
	msg := missingCUDAMessage(res.Missing())
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "CUDA libraries not found: libcurand.so.10 (") {
		t.Errorf("message %q", msg)
	}
	// Loading order: the runtime before cuBLAS, cuDNN's parts before cuDNN.
	order := map[string]int{}
	for i, l := range res.Libs {
		order[l.Soname] = i
	}
	if order["libcudart.so.13"] > order["libcublas.so.13"] || order["libcublasLt.so.13"] > order["libcublas.so.13"] || order["libcudnn_graph.so.9"] > order["libcudnn.so.9"] {
		t.Errorf("loading order %v", order)
	}
}

func TestSessionOptionsLayout(t *testing.T) {
	if err := checkSessionOptionsLayout(); err != nil {
		t.Fatal(err)
	}
}

// TestEPDevicesAndAppendV2OnCPU runs the C API shim on the CPU: GetEpDevices
// lists the CPU provider's device, and a session opened with it appended
// through SessionOptionsAppendExecutionProvider_V2 computes.
func TestEPDevicesAndAppendV2OnCPU(t *testing.T) {
	requireORT(t)
	devs, err := EPDevices()
	if err != nil {
		t.Fatal(err)
	}
	var cpu *EPDevice
	for i, d := range devs {
		if d.EP == "CPUExecutionProvider" && d.Type == "cpu" {
			cpu = &devs[i]
		}
	}
	if cpu == nil {
		t.Fatalf("no CPU provider device among %+v", devs)
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer so.Destroy()
	if err := appendEPDevice(so, *cpu, nil); err != nil {
		t.Fatal(err)
	}
	if err := setSessionLogSeverity(so, 3); err != nil {
		t.Fatal(err)
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(addModel(t), []string{"x"}, []string{"y"}, so)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Destroy()
	x, _ := ort.NewTensor(ort.NewShape(2, 3), []float32{1, 1, 1, 1, 1, 1})
	defer x.Destroy()
	out := []ort.Value{nil}
	if err := sess.Run([]ort.Value{x}, out); err != nil {
		t.Fatal(err)
	}
	defer out[0].Destroy()
	if got := out[0].(*ort.Tensor[float32]).GetData(); got[5] != 7 {
		t.Errorf("y = %v", got)
	}
}

// TestCUDAFallsBackWithOneLine: on a machine without the CUDA provider, its
// libraries or a GPU, --device cuda runs on the CPU after one line on the log.
func TestCUDAFallsBackWithOneLine(t *testing.T) {
	requireORT(t)
	if _, err := CUDADevices(); err == nil {
		t.Skip("CUDA is available here")
	}
	var log bytes.Buffer
	s, err := NewSession(addModel(t), Options{Device: DeviceCUDA, Threads: 1, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Device != DeviceCPU {
		t.Errorf("device %s", s.Device)
	}
	lines := strings.Split(strings.TrimRight(log.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "segtune: CUDA unavailable: ") || !strings.HasSuffix(lines[0], "; running on the CPU") {
		t.Errorf("log %q, want one line", log.String())
	}
	if _, err := s.Run(NewFloat32([]int64{2, 3}, make([]float32, 6))); err != nil {
		t.Fatal(err)
	}
}

// TestCUDABuildNamesMissingLibraries loads the CUDA build that `make ort-cuda`
// installs (in a child process: one ONNX Runtime per process) with no CUDA
// library in reach and checks the fallback line names them.
func TestCUDABuildNamesMissingLibraries(t *testing.T) {
	if os.Getenv("SEGTUNE_TEST_CUDA_CHILD") != "" {
		var log bytes.Buffer
		s, err := NewSession(addModel(t), Options{Device: DeviceCUDA, Threads: 1, Log: &log})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		os.Stdout.WriteString("LOG:" + log.String())
		return
	}
	lib := skip.File(t, CachedCUDALibraryPath(), "make ort-cuda")
	if res := FindCUDALibraries(); len(res.Missing()) == 0 {
		t.Skip("the CUDA libraries are installed here")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestCUDABuildNamesMissingLibraries$", "-test.v")
	cmd.Env = append(os.Environ(), "SEGTUNE_TEST_CUDA_CHILD=1", LibraryEnv+"="+lib)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	s := string(out)
	i := strings.Index(s, "LOG:")
	if i < 0 {
		t.Fatalf("child printed no log:\n%s", s)
	}
	line := strings.SplitN(s[i+4:], "\n", 2)[0]
	if !strings.HasPrefix(line, "segtune: CUDA unavailable: CUDA libraries not found: ") || !strings.Contains(line, "libcudart.so.13") && !strings.Contains(line, "libcudnn.so.9") {
		t.Errorf("fallback line %q", line)
	}
	t.Log(line)
}

// TestCUDASessionRuns opens a session on the GPU (skipped without one, failed
// under SEGTUNE_REQUIRE_GPU) and checks it computes there.
func TestCUDASessionRuns(t *testing.T) {
	requireORT(t)
	devs, err := CUDADevices()
	if err != nil {
		skip.GPU(t, err.Error())
		return
	}
	t.Logf("CUDA devices: %+v", devs)
	var log bytes.Buffer
	s, err := NewSession(addModel(t), Options{Device: DeviceCUDA, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Device != DeviceCUDA {
		t.Fatalf("ran on %s: %s", s.Device, log.String())
	}
	out, err := s.Run(NewFloat32([]int64{2, 3}, []float32{10, 20, 30, 40, 50, 60}))
	if err != nil {
		t.Fatal(err)
	}
	if got := out[0].Float32; got[0] != 11 || got[5] != 66 {
		t.Errorf("y = %v", got)
	}
}
