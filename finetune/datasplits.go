package finetune

import "github.com/segtune/segtune/datalayout"

// FolderData is what a run reads from one data folder.
type FolderData struct {
	// Train is the training split; Val the validation split, zero when
	// the layout has none other than the training data.
	Train, Val DataSpec
	// Sets are the sets listed, training first, for the caller to report
	// (also those listed before an error).
	Sets []*datalayout.Set
}

// OpenData finds the data of a run in the data folder root: the training
// split (opt.Split, default train where the layout has splits) and, where
// the layout has one, the val split for validation. A split with
// unmatched files is a *datalayout.UnmatchedError unless skipBad.
func OpenData(root string, opt datalayout.Options, skipBad bool) (FolderData, error) {
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
	if !datalayout.HasSplit(splits, "val") || datalayout.HasSplit([]string{fd.Train.Split}, "val") {
		return fd, nil
	}
	fd.Val, err = open(datalayout.Options{Format: fd.Train.Format, Split: "val", CrowdAsClass: opt.CrowdAsClass})
	return fd, err
}
