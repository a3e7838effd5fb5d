package runsetup

import (
	"context"
	"errors"
	"path/filepath"
	"slices"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/resolve"
)

// mirror copies the data folders in object storage into the cache
// (resolve.MirrorFolder) and reads them there.
func (s *setup) mirror(ctx context.Context) error {
	d := &s.Data
	for _, p := range []struct {
		key string
		v   *string
	}{{"data", &d.Root}, {"train_images", &d.TrainImages}, {"train_masks", &d.TrainMasks}, {"val_images", &d.ValImages}, {"val_masks", &d.ValMasks}} {
		if !storage.IsURL(*p.v) {
			continue
		}
		m, err := resolve.MirrorFolder(ctx, *p.v)
		if fe, ok := err.(*resolve.FolderError); ok {
			return setting.Usage(&setting.Error{Setting: p.key, Value: fe.Folder, Err: fe.Err})
		} else if err != nil {
			return err
		}
		if m.Remote {
			s.notef("{"+p.key+"} %s: %d images in %s (%d fetched, %d removed)", m.Source, m.Images, m.Dir, m.Fetched, m.Removed)
		}
		*p.v = m.Dir
	}
	return nil
}

// data sets the training and validation data from the data folder (in
// any layout) and the folders given, which win.
func (s *setup) data(cfg *finetune.Config) error {
	isSet := func(key string) bool { return slices.Contains(s.set, key) }
	vs, err := s.ValSplit.Given(isSet("val_split"), isSet("split_seed"), isSet("split_by"))
	if err != nil {
		return err
	}
	folders := s.Data.Folders
	if err := folders.Check(vs); err != nil {
		return setting.Usage(err)
	}
	if s.Data.Root != "" {
		opt, err := s.Layout.Options()
		if err != nil {
			return err
		}
		if cfg.Train, cfg.Val, err = s.open(opt, vs, cfg.SkipBad, cfg.LabelMap != ""); err != nil {
			return err
		}
	}
	folders.Apply(cfg, vs)
	if !cfg.Train.Given() && !s.Resume { // a resumed run has its recorded data
		return setting.Usage(setting.Messagef("give {data} DIR or {train_images} and {train_masks}"))
	}
	return nil
}

// open reads the data folder: the training split (the layout's split,
// default train where the layout has splits) and, where the layout has
// one, the val split, or vs's share of the training split held out.
// Unmatched files stop the run before any work unless skipBad.
func (s *setup) open(opt datalayout.Options, vs *datalayout.ValSplit, skipBad, labelMapGiven bool) (train, val finetune.DataSpec, err error) {
	root := s.Data.Root
	fd, err := finetune.OpenDataSplit(root, opt, vs, skipBad)
	notes := datalayout.Notes{W: s.notes(), Prefix: "segtune: ", Name: s.Name}
	for _, set := range fd.Sets {
		notes.Set(set, labelMapGiven)
	}
	var ve *finetune.ValSplitExistsError
	if errors.As(err, &ve) {
		return train, val, setting.Usage(&setting.Error{Setting: "val_split", Err: err})
	}
	if err != nil {
		return train, val, datalayout.DataError(err)
	}
	if vs != nil {
		s.notef("{val_split} %g: %d of %d images held out for validation (by %s, seed %d), listed in %s",
			vs.Fraction, fd.HeldOut, fd.Kept+fd.HeldOut, vs.By, vs.Seed, filepath.Join(s.Out, finetune.SplitFile))
	}
	if !fd.Val.Given() {
		s.notef("%s has no validation split other than the training data: training without validation", root)
	}
	return fd.Train, fd.Val, nil
}
