package evaluate

import (
	"errors"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
)

// Labelled are the labelled images an evaluation or a preprocessing
// search scores: a split of a data set (Set, whose folder Images and
// Masks are), or two folders whose files are paired by name.
type Labelled struct {
	Set           *datalayout.Set
	Images, Masks *storage.Folder
}

// Openers open labelled data the program's way: Data the split of the
// data set at root to score (val where the layout has one), saying which
// layout it took; Folder the input folder of setting key (images, masks)
// at location, refusing one that cannot be listed.
type Openers struct {
	Data   func(root string) (*datalayout.Set, error)
	Folder func(key, location string) (*storage.Folder, error)
}

// OpenLabelled opens the split of the data set data or, without one, the
// folders images and masks; the caller closes them.
func OpenLabelled(data, images, masks string, open Openers) (*Labelled, error) {
	l := &Labelled{}
	var err error
	if data != "" {
		if l.Set, err = open.Data(data); err != nil {
			return nil, err
		}
		images, masks = l.Set.Root, l.Set.Root
	}
	if l.Images, err = open.Folder("images", images); err != nil {
		return nil, err
	}
	if l.Masks, err = open.Folder("masks", masks); err != nil {
		l.Images.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the folders.
func (l *Labelled) Close() {
	l.Images.Close()
	l.Masks.Close()
}

// PairsError is err, from pairing labelled images, as a program reports
// it: a *FolderError is a usage error naming the folder's setting
// ("images /d: …"); no pairs (ErrNoPairs) and the rest are as they are.
func PairsError(err error) error {
	var fe *FolderError
	if errors.As(err, &fe) {
		return setting.Usage(&setting.Error{Setting: fe.Side, Value: fe.Folder.String(), Err: fe.Err})
	}
	return err
}
