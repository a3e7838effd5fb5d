package folder

import (
	"context"
	"errors"
	"io"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
)

// ForeignOutputError is a file at one of a run's output names that
// segment did not write (it carries no imageio.OutputMark): an annotation
// mask of the same name, say. It is not replaced unless
// Options.Overwrite.
type ForeignOutputError struct {
	Path string
	More int // other such files found with it
}

func (e *ForeignOutputError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *ForeignOutputError) Named(name func(key string) string) string {
	const fix = " (a mask of yours? choose another {output}, or {overwrite} replaces it)"
	if e.More > 0 {
		return setting.Sprintf(name, "%s and %d more files at the outputs' names exist and were not written by segtune segment: they are not replaced"+fix, e.Path, e.More)
	}
	return setting.Sprintf(name, "%s exists and was not written by segtune segment: it is not replaced"+fix, e.Path)
}

// markWindow bounds what is read of a file to find segment's mark, which
// directly follows the PNG header in its outputs.
const markWindow = 1 << 12

// marked reports whether r starts as one of segment's outputs does.
func marked(r io.Reader) bool {
	mark, _, _ := imageio.ReadPNGText(io.LimitReader(r, markWindow), imageio.OutputMarkKey)
	return mark == imageio.OutputMark
}

// checkOwn returns a *ForeignOutputError when f holds a file called name
// that is not one of segment's outputs.
func checkOwn(ctx context.Context, f *storage.Folder, name string) error {
	if ok, err := f.Exists(ctx, name); !ok || err != nil {
		return err
	}
	r, err := f.Open(ctx, name)
	if err != nil {
		return &ForeignOutputError{Path: f.Path(name)} // a folder, a FIFO, a dangling link, a file it cannot read
	}
	defer r.Close()
	if !marked(r) {
		return &ForeignOutputError{Path: f.Path(name)}
	}
	return nil
}

// checkOwnOutputs refuses, before any work, outputs of the images at paths
// that exist and are not segment's (checkOwn), counting them.
func checkOwnOutputs(ctx context.Context, out *storage.Folder, paths []string, overlays bool) error {
	folders := []*storage.Folder{out}
	if overlays {
		folders = append(folders, out.Sub("overlays"))
	}
	var first *ForeignOutputError
	for _, p := range paths {
		for _, f := range folders {
			err := checkOwn(ctx, f, maskName(p))
			var fe *ForeignOutputError
			switch {
			case errors.As(err, &fe) && first == nil:
				first = fe
			case fe != nil:
				first.More++
			case err != nil:
				return err
			}
		}
	}
	if first != nil {
		return first
	}
	return nil
}
