package folder

import (
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Listing is the images a run segments: a sequence of paths (local paths,
// or URLs of bucket objects) consumed once, and how many it yields.
type Listing struct {
	Images iter.Seq2[string, error]
	Total  int
	// ownChecked says that List found every existing output of these
	// images to be segment's own (checkOwnOutputs), so Run need not look
	// again.
	ownChecked bool
}

// Files is the listing of the local image files paths, in their order.
func Files(paths []string) Listing {
	return Listing{Total: len(paths), Images: func(yield func(string, error) bool) {
		for _, p := range paths {
			if !yield(p, nil) {
				return
			}
		}
	}}
}

// NoImagesError is an input folder without image files.
type NoImagesError struct {
	Folder string
}

func (e *NoImagesError) Error() string {
	return fmt.Sprintf("no images (%s) in %s", strings.Join(imageio.ImageExtensions, " "), e.Folder)
}

// FolderError is a bucket folder that cannot be used: the input cannot
// be listed or holds two images whose masks would have one name, or the
// output cannot be written.
type FolderError struct {
	Output bool // the output folder, else the input folder
	Folder *storage.Folder
	Err    error
}

func (e *FolderError) Error() string { return e.Named(setting.Key) }

// Named is the message with the folder's setting (output or input)
// called by name(key) (setting.Namer).
func (e *FolderError) Named(name func(key string) string) string {
	key := "input"
	if e.Output {
		key = "output"
	}
	return fmt.Sprintf("%s %s: %v", name(key), e.Folder, e.Err)
}
func (e *FolderError) Unwrap() error { return e.Err }

// List lists the images of in that opts.Shard segments into out, checking
// before any work what can be checked. A local folder is listed whole,
// checked and guarded against overwriting its images; a bucket folder is
// streamed twice, once here to check names and count, once into the
// pipeline, never held. A bucket output is checked for access; a local
// one loses the temporary files of an earlier, killed run.
func List(ctx context.Context, in, out *storage.Folder, opts Options) (Listing, error) {
	var l Listing
	var err error
	if in.IsLocal() {
		l, err = listLocal(ctx, in, out, opts)
	} else {
		l, err = listBucket(ctx, in, opts.Shard)
	}
	if err != nil {
		return Listing{}, err
	}
	if !out.IsLocal() {
		if err := out.CheckAccess(ctx); err != nil {
			return Listing{}, &FolderError{Output: true, Folder: out, Err: err}
		}
	} else if !in.IsLocal() && !opts.Shard.Sharded() {
		outDir := out.Location().Local
		atomicfile.RemoveStale(outDir)
		atomicfile.RemoveStale(filepath.Join(outDir, "overlays"))
	}
	return l, nil
}

func listLocal(ctx context.Context, in, out *storage.Folder, opts Options) (Listing, error) {
	inDir := in.Location().Local
	paths, err := imageio.ListImages(inDir)
	if err != nil {
		return Listing{}, err
	}
	if len(paths) == 0 {
		return Listing{}, &NoImagesError{Folder: inDir}
	}
	if err := checkDistinctStems(paths); err != nil {
		return Listing{}, err
	}
	if out.IsLocal() {
		if err := guardOutput(out.Location().Local, paths, opts.Overlay != nil, opts.Shard); err != nil {
			return Listing{}, err
		}
	}
	var mine []string
	for _, p := range paths {
		if opts.Shard.Owns(filepath.Base(p)) {
			mine = append(mine, p)
		}
	}
	l := Files(mine)
	if out.IsLocal() && !opts.Overwrite {
		if err := checkOwnOutputs(ctx, out, mine, opts.Overlay != nil); err != nil {
			return Listing{}, err
		}
		l.ownChecked = true
	}
	return l, nil
}

func listBucket(ctx context.Context, in *storage.Folder, spec shard.Spec) (Listing, error) {
	if err := in.CheckList(ctx); err != nil {
		return Listing{}, &FolderError{Folder: in, Err: err}
	}
	all, total := 0, 0
	for p, err := range bucketInputs(ctx, in, shard.All) { // the check pass
		if err != nil {
			return Listing{}, &FolderError{Folder: in, Err: err}
		}
		all++
		if spec.Owns(baseName(p)) {
			total++
		}
	}
	if all == 0 {
		return Listing{}, &NoImagesError{Folder: in.String()}
	}
	return Listing{Images: bucketInputs(ctx, in, spec), Total: total}, nil
}
