package evaluate

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"

	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// ErrNoPairs is the error of pairing data in which no image has a mask.
var ErrNoPairs = errors.New("no image/mask pairs found")

// SameNameError is two images of one file name in different folders (a
// COCO export's "a/x.jpg" and "b/x.jpg", or two video sequences' frames):
// a partial file records each image's scores by its file name, once, so
// a run that writes one is refused before any work (eval merge refused
// its partial after the work).
type SameNameError struct {
	Name   string
	Images [2]string
}

func (e *SameNameError) Error() string {
	return fmt.Sprintf("images %s and %s share the file name %s, by which a partial file records each image's scores; evaluate their folders one at a time, or rename one",
		e.Images[0], e.Images[1], e.Name)
}

// UniqueNames returns a *SameNameError for the first two samples whose
// images share a file name.
func UniqueNames(samples []datalayout.Sample) error {
	byName := make(map[string]string, len(samples))
	for _, p := range samples {
		name := filepath.Base(p.Image)
		if other, dup := byName[name]; dup {
			return &SameNameError{Name: name, Images: [2]string{other, p.Image}}
		}
		byName[name] = p.Image
	}
	return nil
}

// FolderError is a folder of images (Side "images") or masks (Side
// "masks") that cannot be listed.
type FolderError struct {
	Side   string
	Folder *storage.Folder
	Err    error
}

func (e *FolderError) Error() string { return fmt.Sprintf("%s folder %s: %v", e.Side, e.Folder, e.Err) }

func (e *FolderError) Unwrap() error { return e.Err }

// Pairs yields the pairs of images and masks that belong to shard s, and
// their count: set's pairs when a data set is given (imgs and masks are
// then its folder), else those of two local folders paired from their
// whole listings (datalayout.PairFolders), else, a folder being in a
// bucket, those FolderPairs streams.
func Pairs(ctx context.Context, set *datalayout.Set, imgs, masks *storage.Folder, s shard.Spec) (iter.Seq2[datalayout.Sample, error], int, error) {
	if !imgs.IsLocal() || !masks.IsLocal() {
		return FolderPairs(ctx, imgs, masks, s)
	}
	if set != nil {
		return SamplePairs(set.Samples, s)
	}
	samples, err := datalayout.PairFolders(imgs.Location().Local, masks.Location().Local)
	if err != nil {
		return nil, 0, err
	}
	return SamplePairs(samples, s)
}

// SamplePairs yields the pairs of samples (paired local files) that
// belong to shard s, and their count.
func SamplePairs(samples []datalayout.Sample, s shard.Spec) (iter.Seq2[datalayout.Sample, error], int, error) {
	if len(samples) == 0 {
		return nil, 0, ErrNoPairs
	}
	var mine []datalayout.Sample
	for _, p := range samples {
		if s.Owns(filepath.Base(p.Image)) {
			mine = append(mine, p)
		}
	}
	return func(yield func(datalayout.Sample, error) bool) {
		for _, p := range mine {
			if !yield(p, nil) {
				return
			}
		}
	}, len(mine), nil
}

// FolderPairs pairs the images of imgs with the masks of masks by file
// stem and yields the pairs that belong to shard s, and their count. Both
// listings are streamed side by side (buckets of any size), once here to
// check the pairing and count before any work, once as the pairs are
// consumed; an image without a mask, or a mask without an image, is an
// error.
func FolderPairs(ctx context.Context, imgs, masks *storage.Folder, s shard.Spec) (iter.Seq2[datalayout.Sample, error], int, error) {
	if err := imgs.CheckList(ctx); err != nil {
		return nil, 0, &FolderError{Side: "images", Folder: imgs, Err: err}
	}
	if err := masks.CheckList(ctx); err != nil {
		return nil, 0, &FolderError{Side: "masks", Folder: masks, Err: err}
	}
	total := 0
	res, err := joinFolders(ctx, imgs, masks, func(img, _ string) bool {
		if s.Owns(img) {
			total++
		}
		return true
	})
	if err == nil {
		err = res.err()
	}
	if err != nil {
		return nil, 0, err
	}
	if res.pairs == 0 {
		return nil, 0, ErrNoPairs
	}
	return func(yield func(datalayout.Sample, error) bool) {
		stopped := false
		res, err := joinFolders(ctx, imgs, masks, func(img, mask string) bool {
			if !s.Owns(img) {
				return true
			}
			stopped = !yield(datalayout.Sample{Image: imgs.Path(img), Mask: masks.Path(mask)}, nil)
			return !stopped
		})
		if err == nil {
			err = res.err() // the folders changed since the check
		}
		if err != nil && !stopped {
			yield(datalayout.Sample{}, err)
		}
	}, total, nil
}
