package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// flagLike is a command-line option in a string: --name at the start or
// after a space, bracket, quote or =.
var flagLike = regexp.MustCompile("(?:^|[\\s(\\[\"'`=])(--[a-z][a-z0-9-]*)")

// notLibrary are the folders whose sources may name the CLI's flags: the
// CLI, its flag layer, and the programs and helpers around the libraries.
var notLibrary = []string{"bench", "cmd", "experiments", "scripts", "testdata", "internal/cliflag", "internal/testassets"}

// otherTools are options of other programs a library's advice names, by
// file: tf2onnx's, prlimit's, srun's and sbatch's.
var otherTools = map[string][]string{
	"onnx/sniff.go":                 {"--keras", "--output", "--tflite", "--graphdef", "--inputs", "--outputs", "--saved-model"},
	"internal/memlimit/memlimit.go": {"--as"},
	"internal/mpi/mpi_cgo.go":       {"--mpi"},
	"internal/shard/shard.go":       {"--array"},
}

// A library names a setting by its key (internal/setting) and the CLI
// calls it by its flag: no string in a library's source names a flag.
func TestLibrariesNameNoFlag(t *testing.T) {
	root, _ := repo(t)
	found := libraryFlags(t, root)
	for _, f := range found {
		t.Errorf("%s names a command-line flag; name the setting by {key} (internal/setting) and let the CLI name the flag", f)
	}
}

// libraryFlags lists, as "file:line: --flag", the flag-like options in
// the string literals of the libraries' non-test sources under root.
func libraryFlags(t *testing.T, root string) []string {
	t.Helper()
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || slices.Contains(notLibrary, rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range flagLike.FindAllStringSubmatch(s, -1) {
				if !slices.Contains(otherTools[rel], m[1]) {
					found = append(found, rel+":"+strconv.Itoa(fset.Position(lit.Pos()).Line)+": "+m[1])
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// The check finds a flag in a library's string, and passes another
// tool's option where it is allowed.
func TestLibraryFlagsFindsAFlag(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("finetune/a.go", "package finetune\n\nconst advice = \"lower it (--batch 2)\"\n")
	write("onnx/sniff.go", "package onnx\n\nconst how = \"python3 -m tf2onnx.convert --keras FILE\"\n")
	write("cmd/segtune/main.go", "package main\n\nconst flag = \"--batch\"\n")
	write("finetune/a_test.go", "package finetune\n\nconst flag = \"--batch\"\n")
	got := libraryFlags(t, root)
	if want := []string{"finetune/a.go:3: --batch"}; !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}
