package folder

import (
	"context"
	"fmt"
	"iter"
	"path"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Stem is the file name of path without its extension: the name its mask
// gets (STEM.png).
func Stem(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// maskName is the file name of the mask (and overlay) of the image at p.
func maskName(p string) string { return Stem(p) + ".png" }

// baseName is the file name of an item path (a local path or a URL).
func baseName(p string) string { return path.Base(filepath.ToSlash(p)) }

// checkDistinctStems refuses inputs whose masks would overwrite each other
// (a.jpg and a.png both give a.png).
func checkDistinctStems(paths []string) error {
	seen := map[string]string{}
	for _, p := range paths {
		s := Stem(p)
		if prev, ok := seen[s]; ok {
			return fmt.Errorf("%s and %s would both be written as %s.png; rename one", prev, p, s)
		}
		seen[s] = p
	}
	return nil
}

// ImageNames yields the names of the image files directly in f (by
// imageio.ImageExtensions), in byte order.
func ImageNames(ctx context.Context, f *storage.Folder) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		for name, err := range f.List(ctx) {
			if err != nil {
				yield("", err)
				return
			}
			if imageio.IsImageFile(name) && !yield(name, nil) {
				return
			}
		}
	}
}

// StemWindow finds two names in a sorted stream with the same stem (a.jpg
// and a.png), holding only a few names: every name with stem s begins with
// "s.", and the names beginning with a given string are contiguous in byte
// order, so a stem whose "s." no longer prefixes the current name cannot
// come back. What stays open is a chain of nested stems. The zero value
// is ready to use.
type StemWindow struct {
	open []struct{ stem, name string }
}

// Add returns the earlier name with the same stem as name, if any.
func (w *StemWindow) Add(name string) (string, bool) {
	keep := w.open[:0]
	for _, e := range w.open {
		if strings.HasPrefix(name, e.stem+".") {
			keep = append(keep, e)
		}
	}
	w.open = keep
	s := Stem(name)
	for _, e := range w.open {
		if e.stem == s {
			return e.name, true
		}
	}
	w.open = append(w.open, struct{ stem, name string }{s, name})
	return "", false
}

// bucketInputs streams the images of a bucket folder that belong to
// shard s, refusing two images whose masks would have one name. It is
// run twice: once over every shard to check and count before any work,
// once to feed the pipeline.
func bucketInputs(ctx context.Context, in *storage.Folder, s shard.Spec) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		var w StemWindow
		for name, err := range ImageNames(ctx, in) {
			if err != nil {
				yield("", err)
				return
			}
			if prev, dup := w.Add(name); dup {
				yield("", fmt.Errorf("%s and %s would both be written as %s.png; rename one", in.Path(prev), in.Path(name), Stem(name)))
				return
			}
			if s.Owns(name) && !yield(in.Path(name), nil) {
				return
			}
		}
	}
}
