package folder

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
)

// AnnotationRequest asks for a run's masks as pre-annotations too.
type AnnotationRequest struct {
	// Formats lists the formats, comma-separated (annot.WriteFormats).
	Formats string
	// Classes name the classes, background first ("" in it is refused);
	// nil: ModelClasses, the model's settings' names.
	Classes, ModelClasses []string
	// Overwrite replaces annotation files that are there already.
	Overwrite bool
	// Sharded: the run is one shard of several.
	Sharded bool
}

// PlanAnnotations checks r before any work, for a run from in to out:
// its formats, local unsharded folders, the class names, and that its
// files would replace none that is there unless Overwrite. Errors name
// the settings by key (annotations, class_names, shard, overwrite,
// input, output).
func PlanAnnotations(r AnnotationRequest, in, out *storage.Folder) (*annot.ExportOptions, error) {
	if r.Classes == nil {
		r.Classes = r.ModelClasses
	}
	formats, err := annot.ParseWriteFormats(r.Formats)
	if err != nil {
		return nil, &setting.Error{Setting: "annotations", Err: err}
	}
	switch {
	case r.Sharded:
		return nil, setting.Messagef("{annotations} with {shard}: each shard would write its own annotation files; segment the shards without it, " +
			"then run segment {annotations} unsharded, which keeps their masks ({skip_existing})")
	case !in.IsLocal() || !out.IsLocal():
		return nil, setting.Messagef("{annotations} needs local {input} and {output} folders")
	case slices.Contains(r.Classes, ""):
		return nil, setting.Messagef("{class_names} %s: a class name is empty", strings.Join(r.Classes, ","))
	case r.Classes == nil:
		return nil, setting.Messagef("{annotations} names each class: give {class_names} (background first) or a model whose sidecar lists its classes")
	}
	for _, t := range annot.ExportTargets(out.Path(""), formats) {
		if _, err := os.Lstat(t); err == nil && !r.Overwrite {
			return nil, setting.Messagef("{annotations}: %s is there already; give {overwrite} to replace it, or choose another {output}", t)
		}
	}
	// Absolute, so that LabelMe's imagePath can lead from one to the other.
	dir, err := filepath.Abs(out.Path(""))
	if err != nil {
		return nil, err
	}
	images, err := filepath.Abs(in.Path(""))
	if err != nil {
		return nil, err
	}
	return &annot.ExportOptions{WriteOptions: annot.WriteOptions{Classes: r.Classes}, Formats: formats, Dir: dir, ImageDir: images}, nil
}

// CheckAnnotationClasses refuses class names that are not the model's
// classes (n; 0: unknown).
func CheckAnnotationClasses(exp *annot.ExportOptions, n int) error {
	if exp == nil || n == 0 || n == len(exp.Classes) {
		return nil
	}
	return setting.Messagef("{annotations}: %d class names (%s) for a model of %d classes", len(exp.Classes), strings.Join(exp.Classes, ","), n)
}

// WriteAnnotations writes exp's formats from the masks in out of the
// images in in (those that failed have none and are left out) and
// returns how many images it wrote.
func WriteAnnotations(ctx context.Context, in, out *storage.Folder, exp annot.ExportOptions) (int, error) {
	w, err := annot.NewExport(exp)
	if err != nil {
		return 0, &setting.Error{Setting: "annotations", Err: err}
	}
	n, err := annot.AddMasks(w, ImageNames(ctx, in), func(image string) string { return out.Path(Stem(image) + ".png") })
	if err == nil {
		err = w.Close()
	}
	if err != nil {
		return n, &setting.Error{Setting: "annotations", Err: err}
	}
	return n, nil
}
