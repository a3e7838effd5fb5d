package folder

import (
	"fmt"
	"path/filepath"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// OverlapError refuses an output folder that is the input folder, or
// inside it, or holds it.
type OverlapError struct {
	In, Out *storage.Folder
}

func (e *OverlapError) Error() string { return e.Named(setting.Key) }

// Named is the message with the folders' settings called by name(key)
// (setting.Namer): output and input.
func (e *OverlapError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "{output} %s and {input} %s overlap (one is inside the other, or they are the same folder): "+
		"segment would write among the images it reads; choose an output folder outside the input that does not hold it", e.Out, e.In)
}

// CheckFolders refuses (with an *OverlapError) an output folder that
// overlaps the input folder, so that masks are never written among the
// images read, and a later run never reads its own masks.
func CheckFolders(in, out *storage.Folder) error {
	overlap, err := pathguard.Overlapping(in, out)
	if err != nil {
		return err
	}
	if overlap {
		return &OverlapError{In: in, Out: out}
	}
	return nil
}

// guardOutput refuses any output file that would be one of the input
// images (through a symbolic link in the output folder), so that a run
// never overwrites its sources; CheckFolders has refused overlapping
// folders. It then removes temporary files that an earlier, killed run
// left in the output folders. A shard removes only those of the outputs
// it owns: on a folder shared by several machines a process id says
// nothing of another machine's writer, whose temporary file would go
// from under it, but only a rerun of this shard writes this shard's names.
func guardOutput(outDir string, paths []string, overlays bool, spec shard.Spec) error {
	out, err := pathguard.Resolve(outDir)
	if err != nil {
		return err
	}
	outDirs := []string{out}
	if overlays {
		outDirs = append(outDirs, filepath.Join(out, "overlays"))
	}
	sources := map[string]string{}
	for _, p := range paths {
		r, err := pathguard.Resolve(p)
		if err != nil {
			return err
		}
		sources[r] = p
	}
	for _, p := range paths {
		for _, d := range outDirs {
			target, err := pathguard.Resolve(filepath.Join(d, maskName(p)))
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
				mine[maskName(p)] = true
			}
		}
		owned = func(base string) bool { return mine[base] }
	}
	for _, d := range outDirs {
		atomicfile.RemoveStaleOf(d, owned)
	}
	return nil
}
