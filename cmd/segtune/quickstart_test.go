package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// readmeQuickstart returns the shell blocks of README's Quickstart section.
func readmeQuickstart(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Quickstart")
	if start < 0 {
		t.Fatal("README.md has no Quickstart section")
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	var out []string
	for _, b := range blocks {
		out = append(out, b[1])
	}
	return out
}

// shellCommands splits a shell block into commands: continuation lines
// joined, comments dropped.
func shellCommands(block string) []string {
	var cmds []string
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// The README's Quickstart runs as written, on data synth's output: every
// bin/segtune command of it, in a fresh folder, with a small PyTorch export
// standing in for the torchvision model (whose pretrained weights would be
// downloaded, and which trains too slowly for a test). The model snippet
// itself must at least be valid Python.
func TestReadmeQuickstart(t *testing.T) {
	runtimetest.Require(t)
	py := testassets.RequirePython(t, "torch")
	blocks := readmeQuickstart(t)
	if len(blocks) != 2 {
		t.Fatalf("Quickstart has %d shell blocks, want 2 (the model export, then the commands)", len(blocks))
	}
	snippet := regexp.MustCompile(`(?s)python3 -c '(.*)'`).FindStringSubmatch(blocks[0])
	if snippet == nil {
		t.Fatalf("the first Quickstart block is not a python3 -c snippet:\n%s", blocks[0])
	}
	if out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(sys.argv[1])", snippet[1]).CombinedOutput(); err != nil {
		t.Fatalf("the model export snippet is not valid Python: %v\n%s", err, out)
	}
	if !strings.Contains(snippet[1], `"my-model.onnx"`) {
		t.Fatal("the model export snippet does not write my-model.onnx, which the commands use")
	}

	dir := t.TempDir()
	t.Chdir(dir)
	if out, err := exec.Command(py, "-c", torchSegmenter, "my-model.onnx").CombinedOutput(); err != nil {
		t.Fatalf("PyTorch export: %v\n%s", err, out)
	}
	cmds := shellCommands(blocks[1])
	if len(cmds) == 0 || cmds[0] != "make build" {
		t.Fatalf("the commands block should start with make build, got %q", cmds)
	}
	ran := 0
	for _, c := range cmds[1:] {
		args := strings.Fields(c)
		if args[0] != "bin/segtune" {
			t.Fatalf("Quickstart command %q is not a bin/segtune command: the test cannot run it", c)
		}
		if _, err := runCLI(t, args[1:]...); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		ran++
	}
	if ran < 5 {
		t.Fatalf("ran only %d Quickstart commands", ran)
	}
	// What the README says the run folder holds, and what the commands write.
	for _, p := range []string{"runs/first/model.onnx", "runs/first/best.ckpt", "runs/first/metrics.jsonl",
		"runs/first/curves.png", "runs/first/samples.png", "runs/first/tb", "deploy/model-int8.onnx"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after the Quickstart: %v", err)
		}
	}
	masks, _ := filepath.Glob("new-masks/*.png")
	vals, _ := filepath.Glob("mydata/images/val/*")
	if len(masks) == 0 || len(masks) < len(vals) {
		t.Errorf("segment wrote %d masks for %d validation images", len(masks), len(vals))
	}
}
