package datalayout

import (
	"fmt"

	"github.com/segtune/segtune/imageio"
)

// OpenDefault lists the samples of opt.Split in root, or, when opt.Split
// is empty and the layout has a split named fallback (e.g. "val" to
// evaluate, "train" to calibrate), of that split.
func OpenDefault(root string, opt Options, fallback string) (*Set, error) {
	if opt.Split == "" {
		_, splits, err := Splits(root, opt)
		if err != nil {
			return nil, err
		}
		if HasSplit(splits, fallback) {
			opt.Split = fallback
		}
	}
	return Open(root, opt)
}

// Images are the image files of the set's samples, in order.
func (s *Set) Images() []string {
	imgs := make([]string, len(s.Samples))
	for i, x := range s.Samples {
		imgs[i] = x.Image
	}
	return imgs
}

// Description names the set's split as a run records it, e.g.
// "data (cityscapes, split val)".
func (s *Set) Description() string {
	if s.Split == "" {
		return fmt.Sprintf("%s (%s)", s.Root, s.Format)
	}
	return fmt.Sprintf("%s (%s, split %s)", s.Root, s.Format, s.Split)
}

// PairFolders pairs the images of imageDir with the masks of maskDir by
// base name (imageio.PairDataset); a file that pairs with nothing is an
// error.
func PairFolders(imageDir, maskDir string) ([]Sample, error) {
	pairing, err := imageio.PairDataset(imageDir, maskDir)
	if err != nil {
		return nil, err
	}
	if err := pairing.Err(); err != nil {
		return nil, err
	}
	out := make([]Sample, len(pairing.Pairs))
	for i, p := range pairing.Pairs {
		out[i] = Sample{Image: p.Image, Mask: p.Mask}
	}
	return out, nil
}
