package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/shard"
)

// resolvePath returns path absolute and with symbolic links resolved; the
// part that does not exist yet is appended as written.
func resolvePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest), nil
		}
		if filepath.Dir(p) == p {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// within reports whether path is dir or inside it (both resolved).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// guardSegmentOutput refuses an output folder that overlaps the input
// folder (after resolving symbolic links) and any output file that would
// be one of the input images, so segment never overwrites its sources.
// It then removes temporary files that an earlier, killed segment left in
// the output folders. A shard removes only those of the outputs it owns: on
// a folder shared by several machines a process id says nothing of
// another machine's writer, whose temporary file would go from under it,
// but only a rerun of this shard writes this shard's names.
func guardSegmentOutput(inDir, outDir string, paths []string, overlays bool, spec shard.Spec) error {
	in, err := resolvePath(inDir)
	if err != nil {
		return err
	}
	out, err := resolvePath(outDir)
	if err != nil {
		return err
	}
	outDirs := []string{out}
	if overlays {
		outDirs = append(outDirs, filepath.Join(out, "overlays"))
	}
	if within(out, in) {
		return fmt.Errorf("--output %s is inside --input %s (or the same folder): segment would write among the images it reads; choose an output folder outside the input", outDir, inDir)
	}
	for _, d := range outDirs[1:] {
		if within(in, d) {
			return fmt.Errorf("--input %s is the overlays folder of --output %s: its images would be overwritten; choose another output folder", inDir, outDir)
		}
	}
	sources := map[string]string{}
	for _, p := range paths {
		r, err := resolvePath(p)
		if err != nil {
			return err
		}
		sources[r] = p
	}
	for _, p := range paths {
		for _, d := range outDirs {
			target, err := resolvePath(filepath.Join(d, stem(p)+".png"))
			if err != nil {
				return err
			}
			if src, ok := sources[target]; ok {
				return fmt.Errorf("the mask of %s would overwrite the input image %s (a symbolic link leads there); choose another output folder", p, src)
			}
		}
	}
	var owned func(string) bool
	if spec.Sharded() {
		mine := map[string]bool{}
		for _, p := range paths {
			if spec.Owns(filepath.Base(p)) {
				mine[stem(p)+".png"] = true
			}
		}
		owned = func(base string) bool { return mine[base] }
	}
	for _, d := range outDirs {
		atomicfile.RemoveStaleOf(d, owned)
	}
	return nil
}
