package datalayout

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
)

// WriteSplit writes the two sides of set, divided into train and val
// (ValSplit.Divide), in out: with lists, out/train.txt and out/val.txt
// (the image paths below root, one a line); else images/{train,val} and
// masks/{train,val} as Convert writes them (masks: how the masks read).
// It says on w what it wrote.
func WriteSplit(w io.Writer, set *Set, root, out string, train, val []Sample, masks imageio.MaskOptions, lists bool) error {
	if lists {
		return writeSplitLists(w, root, out, train, val)
	}
	sides := []*Set{withSamples(set, "train", train), withSamples(set, "val", val)}
	if _, err := Convert(sides, out, masks, nil); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "wrote %d training and %d validation pairs to %s (images/{train,val}, masks/{train,val})\n", len(train), len(val), out)
	return err
}

// writeSplitLists writes out/train.txt and out/val.txt: the samples'
// image paths below root, one a line.
func writeSplitLists(w io.Writer, root, out string, train, val []Sample) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, l := range []struct {
		name    string
		samples []Sample
	}{{"train.txt", train}, {"val.txt", val}} {
		if err := atomicfile.Write(filepath.Join(out, l.name), []byte(imageList(root, l.samples)), 0o644); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "wrote %s and %s (%d and %d images)\n", filepath.Join(out, "train.txt"), filepath.Join(out, "val.txt"), len(train), len(val))
	return err
}

// withSamples is set with only samples, as split.
func withSamples(set *Set, split string, samples []Sample) *Set {
	s := *set
	s.Split, s.Samples, s.Unmatched = split, samples, nil
	return &s
}

// imageList is the samples' image paths below root, one a line.
func imageList(root string, samples []Sample) string {
	var b strings.Builder
	for _, s := range samples {
		rel, err := filepath.Rel(root, s.Image)
		if err != nil {
			rel = s.Image
		}
		b.WriteString(filepath.ToSlash(rel) + "\n")
	}
	return b.String()
}
