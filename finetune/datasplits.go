package finetune

import (
	"fmt"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
)

// FolderData is what a run reads from one data folder.
type FolderData struct {
	// Train is the training split; Val the validation split, zero when
	// the layout has none other than the training data.
	Train, Val DataSpec
	// Sets are the sets listed, training first, for the caller to report
	// (also those listed before an error).
	Sets []*datalayout.Set
	// Kept and HeldOut count the training split's samples a ValSplit
	// keeps for training and holds out for validation.
	Kept, HeldOut int
}

// ValSplitExistsError refuses a ValSplit of data that has a validation
// split of its own.
type ValSplitExistsError struct{ Root, Split string }

func (e *ValSplitExistsError) Error() string {
	return fmt.Sprintf("%s has a validation split (%s) already: validate on it (no split of the training data), or train on the whole of one split with the split named", e.Root, e.Split)
}

// OpenData finds the data of a run in the data folder root: the training
// split (opt.Split, default train where the layout has splits) and, where
// the layout has one, the val split for validation. A split with
// unmatched files is a *datalayout.UnmatchedError unless skipBad.
func OpenData(root string, opt datalayout.Options, skipBad bool) (FolderData, error) {
	return OpenDataSplit(root, opt, nil, skipBad)
}

// OpenDataSplit is OpenData that, with vs, validates on a fraction of the
// training split held out by vs instead of a split of the layout's; data
// with a val split of its own is a *ValSplitExistsError.
func OpenDataSplit(root string, opt datalayout.Options, vs *datalayout.ValSplit, skipBad bool) (FolderData, error) {
	var fd FolderData
	_, splits, err := datalayout.Splits(root, opt)
	if err != nil {
		return fd, err
	}
	if opt.Split == "" && datalayout.HasSplit(splits, "train") {
		opt.Split = "train"
	}
	open := func(opt datalayout.Options) (DataSpec, error) {
		set, err := datalayout.Open(root, opt)
		if err != nil {
			return DataSpec{}, err
		}
		fd.Sets = append(fd.Sets, set)
		if err := set.Err(); err != nil && !skipBad {
			return DataSpec{}, err
		}
		return DataSpec{Data: root, Format: set.Format, Split: set.Split, CrowdAsClass: opt.CrowdAsClass}, nil
	}
	if fd.Train, err = open(opt); err != nil {
		return fd, err
	}
	if vs != nil {
		if datalayout.HasSplit(splits, "val") && !datalayout.HasSplit([]string{fd.Train.Split}, "val") {
			return fd, &ValSplitExistsError{Root: root, Split: "val"}
		}
		// Divided now, so that data the split cannot divide stops the
		// run before any work.
		train, val, err := vs.Divide(fd.Sets[0].Samples)
		if err != nil {
			return fd, fmt.Errorf("%s: %w", root, err)
		}
		fd.Kept, fd.HeldOut = len(train), len(val)
		fd.Train.ValSplit = vs
		fd.Val = fd.Train
		fd.Val.HeldOut = true
		return fd, nil
	}
	if !datalayout.HasSplit(splits, "val") || datalayout.HasSplit([]string{fd.Train.Split}, "val") {
		return fd, nil
	}
	fd.Val, err = open(datalayout.Options{Format: fd.Train.Format, Split: "val", CrowdAsClass: opt.CrowdAsClass})
	return fd, err
}

// Folders are a run's data given as folders of images and masks, over (or
// instead of) a data folder's.
type Folders struct{ TrainImages, TrainMasks, ValImages, ValMasks string }

// Check refuses a folder given without its pair, which would be dropped
// (training or validation on other data than the user named, or none),
// and validation folders with vs, a share of the training data held out
// for validation.
func (f Folders) Check(vs *datalayout.ValSplit) error {
	switch {
	case (f.TrainImages == "") != (f.TrainMasks == ""):
		return setting.Messagef("{train_images} and {train_masks} go together: give both, or neither")
	case (f.ValImages == "") != (f.ValMasks == ""):
		return setting.Messagef("{val_images} and {val_masks} go together: give both, or neither")
	case vs != nil && f.ValImages != "":
		return setting.Messagef("{val_split} and {val_images}: give validation data, or a fraction of the training data to hold out for it, not both")
	}
	return nil
}

// Apply sets cfg's training data to the folders given, holding out vs for
// validation, and its validation data to the validation folders given.
func (f Folders) Apply(cfg *Config, vs *datalayout.ValSplit) {
	if f.TrainImages != "" {
		cfg.Train = DataSpec{Images: f.TrainImages, Masks: f.TrainMasks, ValSplit: vs}
		if vs != nil {
			cfg.Val = cfg.Train
			cfg.Val.HeldOut = true
		}
	}
	if f.ValImages != "" {
		cfg.Val = DataSpec{Images: f.ValImages, Masks: f.ValMasks}
	}
}
