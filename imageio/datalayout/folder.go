package datalayout

import (
	"errors"
	"io"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// Folder is a labelled data folder as its user gives it (setting data):
// its layout, how its masks read (a label map's spec, a colour masks'
// palette file) and where notes about it go.
type Folder struct {
	Data                  string
	Layout                Layout
	LabelMap, MaskPalette string
	Notes                 Notes
}

// Masks reads how the folder's masks read (ReadMasks).
func (f Folder) Masks() (imageio.MaskOptions, []string, error) {
	return ReadMasks(f.LabelMap, f.MaskPalette)
}

// OpenAll opens every split a whole-data-set job goes through
// (OpenAllSplits).
func (f Folder) OpenAll() ([]*Set, error) {
	opt, err := f.Layout.Options()
	if err != nil {
		return nil, err
	}
	return OpenAllSplits(f.Data, opt, f.LabelMap != "", f.Notes)
}

// ConvertRequest is a data folder to write in the canonical layout into
// Out (Convert); Progress, when set, hears each split's start (done 0)
// and every pair written.
type ConvertRequest struct {
	Folder
	Out      string
	Progress func(done, total int)
}

// ConvertFolder converts r's folder into r.Out and returns the pairs
// written. Every split is opened and checked before anything is written:
// unmatched files, or no pair in any split, stop it.
func ConvertFolder(r ConvertRequest) (int, error) {
	masks, _, err := r.Masks()
	if err != nil {
		return 0, err
	}
	if err := CheckConvertOutput(r.Data, r.Out); err != nil {
		return 0, err
	}
	sets, err := r.OpenAll()
	if err != nil {
		return 0, err
	}
	for _, set := range sets {
		if err := set.Err(); err != nil {
			return 0, DataError(err)
		}
	}
	if err := RequirePairs(r.Data, sets); err != nil {
		return 0, err
	}
	converted, err := Convert(sets, r.Out, masks, func(cs ConvertedSplit, done, total int) {
		if r.Progress != nil {
			r.Progress(done, total)
		}
		if done == total {
			r.Notes.Printf("wrote %d pairs to %s and %s", total, cs.ImageDir, cs.MaskDir)
		}
	})
	total := 0
	for _, cs := range converted {
		total += cs.Pairs
	}
	return total, err
}

// SplitRequest is a validation split to hold out of a data folder's one
// split (the layout's, default train) and write into Out (WriteSplit):
// as lists with Lists. Split is checked (ValSplit.Check) already.
type SplitRequest struct {
	Folder
	Out   string
	Split ValSplit
	Lists bool
}

// SplitFolder divides r's folder and writes both sides, saying on w what
// it wrote.
func SplitFolder(w io.Writer, r SplitRequest) error {
	masks, _, err := r.Masks()
	if err != nil {
		return err
	}
	var oe *OverlapError
	if err := CheckConvertOutput(r.Data, r.Out); errors.As(err, &oe) {
		return setting.Usage(setting.Messagef("{out} %s and {data} %s overlap: choose an output folder outside the data", r.Out, r.Data))
	} else if err != nil {
		return err
	}
	opt, err := r.Layout.Options()
	if err != nil {
		return err
	}
	set, err := OpenData(r.Data, opt, "train", r.LabelMap != "", r.Notes)
	if err != nil {
		return err
	}
	if err := set.Err(); err != nil {
		return DataError(err)
	}
	train, val, err := r.Split.Divide(set.Samples)
	if err != nil {
		return &setting.Error{Setting: "data", Value: r.Data, Err: err}
	}
	r.Notes.Printf("%d of %d images held out for validation (by %s, seed %d)", len(val), len(set.Samples), r.Split.By, r.Split.Seed)
	return WriteSplit(w, set, r.Data, r.Out, train, val, masks, r.Lists)
}
