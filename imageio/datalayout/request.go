package datalayout

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
)

// Layout is how to read a data folder as its user writes it: Format and
// Split (both "" to detect and default) and Crowd, what COCO annotations
// marked iscrowd become ("ignore", the default, or "class").
type Layout struct {
	Format, Split string
	Crowd         string
}

// Options are the layout's Options; a Crowd other than ignore or class
// is a usage *setting.Error of coco_crowd.
func (l Layout) Options() (Options, error) {
	opt := Options{Format: l.Format, Split: l.Split}
	switch l.Crowd {
	case "", "ignore":
	case "class":
		opt.CrowdAsClass = true
	default:
		return opt, setting.Usage(setting.Errorf("coco_crowd", strconv.Quote(l.Crowd), "must be ignore or class"))
	}
	return opt, nil
}

// Notes is where a library tells its user what it found, a line at a
// time: to W (nil: nowhere), each line after Prefix, naming settings with
// Name (by key when nil).
type Notes struct {
	W      io.Writer
	Prefix string
	Name   func(key string) string
}

// Printf writes one note.
func (n Notes) Printf(format string, args ...any) {
	if n.W != nil {
		fmt.Fprintf(n.W, "%s%s\n", n.Prefix, fmt.Sprintf(format, args...))
	}
}

// Set says which layout set was read with and what its masks may need
// (Set.Notes; labelMapGiven: the user gives a label map).
func (n Notes) Set(set *Set, labelMapGiven bool) {
	name := n.Name
	if name == nil {
		name = setting.Key
	}
	for _, line := range set.Notes(labelMapGiven, name) {
		n.Printf("%s", line)
	}
}

// ReadMasks reads how masks are read: a label map's spec
// (imageio.ParseLabelMap) and a palette file for colour masks
// (ReadMaskPalette), with the class names a CVAT labelmap gives. A value
// that cannot be used is a usage *setting.Error of label_map or
// mask_palette.
func ReadMasks(labelMap, palette string) (imageio.MaskOptions, []string, error) {
	var masks imageio.MaskOptions
	var err error
	if labelMap != "" {
		if masks.Map, err = imageio.ParseLabelMap(labelMap); err != nil {
			return masks, nil, setting.Usage(&setting.Error{Setting: "label_map", Err: err})
		}
	}
	if palette == "" {
		return masks, nil, nil
	}
	pal, names, err := ReadMaskPalette(palette)
	if err != nil {
		return masks, nil, setting.Usage(&setting.Error{Setting: "mask_palette", Err: err})
	}
	masks.Palette = pal
	return masks, names, nil
}

// OpenData lists the samples of the data folder root (setting data):
// opt's split, or else fallback where the layout has it (val to
// evaluate), and notes which layout it took and how many pairs it found
// (labelMapGiven as for Notes.Set). A URL, or a folder that cannot be read
// as data, is a usage *setting.Error of data.
func OpenData(root string, opt Options, fallback string, labelMapGiven bool, notes Notes) (*Set, error) {
	if storage.IsURL(root) {
		return nil, setting.Usage(setting.Errorf("data", root, "this command reads a local folder; copy the data set first (segtune finetune mirrors a URL itself)"))
	}
	set, err := OpenDefault(root, opt, fallback)
	if err != nil {
		return nil, setting.Usage(&setting.Error{Setting: "data", Err: err})
	}
	notes.Set(set, labelMapGiven)
	return set, nil
}

// OpenAllSplits opens the splits of the data folder root that a
// whole-data-set job goes through (OpenSplits), noting each as OpenData
// does; a folder that cannot be read as data is a usage *setting.Error of
// data.
func OpenAllSplits(root string, opt Options, labelMapGiven bool, notes Notes) ([]*Set, error) {
	sets, err := OpenSplits(root, opt)
	if err != nil {
		return nil, setting.Usage(&setting.Error{Setting: "data", Err: err})
	}
	for _, set := range sets {
		notes.Set(set, labelMapGiven)
	}
	return sets, nil
}

// DataError is err, from reading the data folder (setting data), as a
// *setting.Error of data: a usage error unless it names files that pair
// with nothing (*UnmatchedError), which a user fixes in the data.
func DataError(err error) error {
	var ue *UnmatchedError
	if errors.As(err, &ue) {
		return &setting.Error{Setting: "data", Err: err}
	}
	return setting.Usage(&setting.Error{Setting: "data", Err: err})
}
