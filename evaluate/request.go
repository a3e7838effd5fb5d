package evaluate

import (
	"context"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Request is an evaluation described in plain values; its Plan is what
// Run runs.
type Request struct {
	// Model is the model's file; Settings are its settings (preprocessing,
	// label map, class names).
	Model    string
	Settings imageio.Sidecar
	// Images and Masks are the folders whose files are paired by name;
	// with Set, a data set's split, they are its folder and Set's pairs
	// are taken.
	Images, Masks *storage.Folder
	Set           *datalayout.Set
	Shard         shard.Spec
	// Options say how the images are scored; Plan fills in their Model,
	// Images and Masks.
	Options SetupOptions
	// Batch is the images per model run (see Plan.Batch).
	Batch int
	// Partial says that the scores go to a partial file (WritePartial),
	// which records each image by its file name, once: a Set with two
	// images of one name is refused (UniqueNames).
	Partial bool
	// Open opens the model at path with its settings.
	Open func(path string, settings imageio.Sidecar) (*inference.Segmenter, error)
}

// Plan pairs the request's images and masks (Pairs: ErrNoPairs, a
// *FolderError), and only then opens the model and reads how the
// evaluation is scored (NewSetup: a *ClassNamesError when the class names
// do not fit the model). The plan's Segmenter is the caller's to close.
func (r Request) Plan(ctx context.Context) (Plan, error) {
	p := Plan{Shard: r.Shard, LabelMap: r.Settings.LabelMap, MaskPalette: r.Options.MaskPalette}
	var err error
	if p.Pairs, p.Total, err = Pairs(ctx, r.Set, r.Images, r.Masks, r.Shard); err != nil {
		return Plan{}, err
	}
	if r.Partial && r.Set != nil {
		if err := UniqueNames(r.Set.Samples); err != nil {
			return Plan{}, err
		}
	}
	o := r.Options
	o.Model, o.Images, o.Masks = r.Model, r.Images.String(), r.Masks.String()
	if r.Set != nil {
		o.Images, o.Masks = r.Set.Description(), r.Set.Description()
	}
	if p.Segmenter, err = r.Open(r.Model, r.Settings); err != nil {
		return Plan{}, err
	}
	if p.Setup, err = NewSetup(p.Segmenter, r.Settings, o); err != nil {
		p.Segmenter.Close()
		return Plan{}, err
	}
	p.Batch = p.Segmenter.BatchFor(r.Batch)
	p.ReadFolders(ctx, r.Images, r.Masks)
	return p, nil
}
