package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
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

// overlapping reports whether folder a is folder b, or one is inside the
// other: local folders compared as absolute paths with symbolic links
// resolved, bucket folders by scheme, bucket and prefix. A local folder
// and a bucket folder never overlap. file:// URLs are paths by now
// (normalizePathFlags).
func overlapping(a, b *storage.Folder) (bool, error) {
	if a.IsLocal() != b.IsLocal() {
		return false, nil
	}
	if !a.IsLocal() {
		return a.Within(b) || b.Within(a), nil
	}
	ra, err := resolvePath(a.Location().Local)
	if err != nil {
		return false, err
	}
	rb, err := resolvePath(b.Location().Local)
	if err != nil {
		return false, err
	}
	return within(ra, rb) || within(rb, ra), nil
}

// guardFolders refuses an output folder that overlaps the input folder
// (either inside the other, or the same), so that segment never writes
// among the images it reads, and a later run never reads its own masks.
func guardFolders(in, out *storage.Folder) error {
	overlap, err := overlapping(in, out)
	if err != nil {
		return err
	}
	if overlap {
		return cli.Exit(fmt.Sprintf("--output %s and --input %s overlap (one is inside the other, or they are the same folder): "+
			"segment would write among the images it reads; choose an output folder outside the input that does not hold it", out, in), 2)
	}
	return nil
}

// guardSegmentOutput refuses any output file that would be one of the
// input images (through a symbolic link in the output folder), so segment
// never overwrites its sources; guardFolders has refused overlapping
// folders. It then removes temporary files that an earlier, killed
// segment left in the output folders. A shard removes only those of the
// outputs it owns: on a folder shared by several machines a process id
// says nothing of another machine's writer, whose temporary file would go
// from under it, but only a rerun of this shard writes this shard's names.
func guardSegmentOutput(outDir string, paths []string, overlays bool, spec shard.Spec) error {
	out, err := resolvePath(outDir)
	if err != nil {
		return err
	}
	outDirs := []string{out}
	if overlays {
		outDirs = append(outDirs, filepath.Join(out, "overlays"))
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

// guardFinetuneOut refuses a finetune --out folder that holds the base
// model (and so its sidecar and external data), is one of the data
// folders or lies inside a --data folder: the run writes model.onnx, config.json, metrics.jsonl,
// curves.png and checkpoints there. Folders are compared resolved; the
// base model's folder is taken both as named (where its sidecar is looked
// for) and with links resolved.
func guardFinetuneOut(out string, cfg finetune.Config) error {
	ro, err := resolvePath(out)
	if err != nil {
		return err
	}
	type guarded struct{ dir, what string }
	var folders []guarded
	if b := cfg.Network.BaseModel; b != "" {
		what := "the folder of the base model " + b
		folders = append(folders, guarded{filepath.Dir(b), what})
		if r, err := filepath.EvalSymlinks(b); err == nil {
			folders = append(folders, guarded{filepath.Dir(r), what})
		}
	}
	for _, d := range []guarded{{cfg.Train.Images, "the training images folder"}, {cfg.Train.Masks, "the training masks folder"},
		{cfg.Val.Images, "the validation images folder"}, {cfg.Val.Masks, "the validation masks folder"}} {
		if d.dir != "" {
			folders = append(folders, guarded{d.dir, d.what + " " + d.dir})
		}
	}
	// A run folder inside a data folder would be read as data by the
	// layouts that walk nested folders.
	for _, d := range []string{cfg.Train.Data, cfg.Val.Data} {
		if d == "" {
			continue
		}
		r, err := resolvePath(d)
		if err != nil {
			return err
		}
		if within(ro, r) {
			return cli.Exit(fmt.Sprintf("finetune: --out %s is inside the data folder %s: the run's images (curves.png, samples.png) would mix with the data; choose a folder outside it", out, d), 2)
		}
	}
	for _, g := range folders {
		r, err := resolvePath(g.dir)
		if err != nil {
			return err
		}
		if r == ro {
			return cli.Exit(fmt.Sprintf("finetune: --out %s is %s: the run writes %s, %s, %s, %s and checkpoints there; choose another folder",
				out, g.what, finetune.ModelFile, finetune.ConfigFile, finetune.HistoryFile, finetune.PlotFile), 2)
		}
	}
	return nil
}
