// Package layout holds the checks of segtune's package layout (issue #42):
// a top level that names the pipeline, a finetune root that is no hub, and
// no loop between the top-level folders.
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	// maxTopLevel is the most top-level Go package folders besides the
	// ones notTopLevel names; scripts/reshape-packages.sh lowers it to 13
	// when it moves the helpers under the packages they serve.
	maxTopLevel = 13
	// maxFinetuneImports is the most project packages outside finetune/
	// that the finetune root imports: its own sub-packages are its parts,
	// the others make it a hub. 14 since the graph side moved to
	// finetune/trainer and the checkpoint's inference model to
	// finetune/export (#42): the rest are the configuration's types, the
	// run folder, MPI and the reports.
	maxFinetuneImports = 14
)

// notTopLevel are the folders that are no library of the pipeline.
var notTopLevel = []string{"bench", "cmd", "experiments", "internal", "scripts", "testdata"}

func TestTopLevelFolders(t *testing.T) {
	root, _ := repo(t)
	var folders []string
	for dir := range packages(t, root) {
		top, _, _ := strings.Cut(dir, "/")
		if top != "." && !slices.Contains(notTopLevel, top) && !slices.Contains(folders, top) {
			folders = append(folders, top)
		}
	}
	slices.Sort(folders)
	if len(folders) > maxTopLevel {
		t.Errorf("%d top-level package folders (%s); at most %d: put a helper under the package it serves, non-API code under internal/",
			len(folders), strings.Join(folders, " "), maxTopLevel)
	}
}

func TestFinetuneRootImports(t *testing.T) {
	root, module := repo(t)
	imports := packages(t, root)["finetune"]
	var project []string
	for _, p := range imports {
		rel, ok := strings.CutPrefix(p, module+"/")
		if ok && !strings.HasPrefix(rel, "finetune/") {
			project = append(project, rel)
		}
	}
	if len(project) > maxFinetuneImports {
		t.Errorf("the finetune root imports %d project packages outside finetune/ (%s); at most %d: move a job into the package that owns it",
			len(project), strings.Join(project, " "), maxFinetuneImports)
	}
}

// TestNoFolderLoop checks that no chain of imports leads from a top-level
// folder back into itself through another (internal/X and cmd/X count as
// folders of their own: they are leaves of different layers).
func TestNoFolderLoop(t *testing.T) {
	root, module := repo(t)
	edges := map[string][]string{}
	for dir, imports := range packages(t, root) {
		from := folder(dir)
		for _, p := range imports {
			rel, ok := strings.CutPrefix(p, module+"/")
			if to := folder(rel); ok && to != from && !slices.Contains(edges[from], to) {
				edges[from] = append(edges[from], to)
			}
		}
	}
	if loop := findLoop(edges); loop != nil {
		t.Errorf("the top-level folders import each other in a loop: %s", strings.Join(loop, " -> "))
	}
}

// TestInternalIsTheGround checks that internal/ imports nothing of the
// project outside internal/: its packages are the ground every layer
// stands on (a test helper that needs onnx or runtime lives beside them,
// as onnx/onnxtest and runtime/runtimetest do), so no import runs from
// internal/ back up to the layers that use it.
func TestInternalIsTheGround(t *testing.T) {
	root, module := repo(t)
	for dir, imports := range packages(t, root) {
		if !strings.HasPrefix(dir, "internal/") {
			continue
		}
		for _, p := range imports {
			if rel, ok := strings.CutPrefix(p, module+"/"); ok && !strings.HasPrefix(rel, "internal/") {
				t.Errorf("%s imports %s: internal/ stands below every other folder", dir, rel)
			}
		}
	}
}

// folder is the layout unit a package belongs to.
func folder(dir string) string {
	parts := strings.Split(dir, "/")
	if len(parts) > 1 && (parts[0] == "internal" || parts[0] == "cmd") {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// findLoop returns one loop of edges (first node repeated last), or nil.
func findLoop(edges map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, m := range edges[n] {
			switch state[m] {
			case onPath:
				i := slices.Index(path, m)
				return append(slices.Clone(path[i:]), m)
			case unseen:
				if loop := visit(m); loop != nil {
					return loop
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	nodes := make([]string, 0, len(edges))
	for n := range edges {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		if state[n] == unseen {
			if loop := visit(n); loop != nil {
				return loop
			}
		}
	}
	return nil
}

// repo returns the repository's root (the folder of go.mod) and module path.
func repo(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if m, ok := strings.CutPrefix(line, "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatalf("%s: no module line", filepath.Join(dir, "go.mod"))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// packages maps each folder (relative to root) that holds production Go
// files to the paths they import. Tests, testdata and hidden folders are
// left out.
func packages(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if out[rel] == nil {
			out[rel] = []string{}
		}
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if !slices.Contains(out[rel], p) {
				out[rel] = append(out[rel], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
