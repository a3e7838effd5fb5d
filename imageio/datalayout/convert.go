package datalayout

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
)

// NotEmptyError is an output folder that already holds files: a
// conversion writes only into a new or empty folder.
type NotEmptyError struct{ Dir string }

func (e *NotEmptyError) Error() string {
	return fmt.Sprintf("%s is not empty; give a new or empty folder", e.Dir)
}

// CheckOutput refuses an output folder that holds files (a
// *NotEmptyError) or cannot be read; a missing one is fine.
func CheckOutput(out string) error {
	entries, err := os.ReadDir(out)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return &NotEmptyError{Dir: out}
	}
	return nil
}

// OverlapError is an output folder that is the data folder a conversion
// reads, lies inside it or holds it: a conversion never writes among its
// inputs.
type OverlapError struct{ Data, Out string }

func (e *OverlapError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *OverlapError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "{out} %s and {data} %s overlap (one is inside the other, or they are the same folder); choose an output folder outside the data", e.Out, e.Data)
}

// CheckConvertOutput refuses an output folder for converting the data
// folder root that overlaps it (*OverlapError, symbolic links resolved),
// holds files (*NotEmptyError) or cannot be read, naming the output by
// its key, out: a usage error (setting.Usage), found before any work.
func CheckConvertOutput(root, out string) error {
	overlap, err := pathguard.Overlap(root, out)
	if err == nil && overlap {
		return setting.Usage(&OverlapError{Data: root, Out: out})
	}
	if err == nil {
		err = CheckOutput(out)
	}
	var ne *NotEmptyError
	switch {
	case errors.As(err, &ne):
		return setting.Usage(setting.Messagef("{out} %w", err))
	case err != nil:
		return setting.Usage(&setting.Error{Setting: "out", Value: out, Err: err})
	}
	return nil
}

// EmptyError is a data folder in which no split holds a single image/mask
// pair: a layout was found (Format, "" for none), but nothing in it can be
// checked, converted or trained on.
type EmptyError struct{ Root, Format string }

func (e *EmptyError) Error() string {
	format := "no"
	if e.Format != "" {
		format = "a " + e.Format
	}
	return fmt.Sprintf("%s: %s layout, and not one image/mask pair in it", e.Root, format)
}

// RequirePairs refuses, with an *EmptyError of the setting data, the
// splits sets of the data folder root when none holds a pair.
func RequirePairs(root string, sets []*Set) error {
	for _, set := range sets {
		if len(set.Samples) > 0 {
			return nil
		}
	}
	e := &EmptyError{Root: root}
	if len(sets) > 0 {
		e.Format = sets[0].Format
	}
	return setting.Messagef("{data} %w", e)
}

// ConvertedSplit is where Convert writes one split.
type ConvertedSplit struct {
	// Split is the canonical split name ("train", "val", …; "" for a
	// layout without splits).
	Split string
	// ImageDir and MaskDir are OUT/images/SPLIT and OUT/masks/SPLIT.
	ImageDir, MaskDir string
	// Pairs is the number of samples written.
	Pairs int
}

// Convert writes sets in the canonical layout under out: each image file
// as it is to OUT/images/SPLIT/NAME.EXT and its labels, read through
// masks, as a palette PNG to OUT/masks/SPLIT/NAME.png, every file
// atomically. out must be new or empty, and no set may have unmatched
// files: both are checked before anything is written. progress, when not
// nil, is told each split's start (done 0) and every sample written.
func Convert(sets []*Set, out string, masks imageio.MaskOptions, progress func(s ConvertedSplit, done, total int)) ([]ConvertedSplit, error) {
	if err := CheckOutput(out); err != nil {
		return nil, err
	}
	for _, set := range sets {
		if err := set.Err(); err != nil {
			return nil, err
		}
	}
	if progress == nil {
		progress = func(ConvertedSplit, int, int) {}
	}
	var done []ConvertedSplit
	for _, set := range sets {
		names, err := flatNames(set.Samples)
		if err != nil {
			return done, err
		}
		split := CanonicalSplit(set.Split)
		cs := ConvertedSplit{Split: split, ImageDir: filepath.Join(out, "images", split), MaskDir: filepath.Join(out, "masks", split)}
		for _, d := range []string{cs.ImageDir, cs.MaskDir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return done, err
			}
		}
		progress(cs, 0, len(set.Samples))
		for i, s := range set.Samples {
			if err := convertSample(s, masks, filepath.Join(cs.ImageDir, names[i]+strings.ToLower(filepath.Ext(s.Image))),
				filepath.Join(cs.MaskDir, names[i]+".png")); err != nil {
				return done, err
			}
			cs.Pairs = i + 1
			progress(cs, i+1, len(set.Samples))
		}
		done = append(done, cs)
	}
	return done, nil
}

// flatNames names the samples for one flat folder: their base names, or,
// where those repeat, their names with "/" made "_".
func flatNames(samples []Sample) ([]string, error) {
	names := make([]string, len(samples))
	seen := map[string]bool{}
	unique := true
	for i, s := range samples {
		names[i] = filepath.Base(filepath.FromSlash(s.Name))
		if seen[names[i]] {
			unique = false
		}
		seen[names[i]] = true
	}
	if unique {
		return names, nil
	}
	clear(seen)
	for i, s := range samples {
		names[i] = strings.ReplaceAll(s.Name, "/", "_")
		if seen[names[i]] {
			return nil, fmt.Errorf("data convert: two samples would both be named %q in one folder (one is %s)", names[i], s.Image)
		}
		seen[names[i]] = true
	}
	return names, nil
}

// convertSample copies the image file as it is to imgOut and writes the
// labels, read through masks, as a palette PNG to maskOut, both
// atomically.
func convertSample(s Sample, masks imageio.MaskOptions, imgOut, maskOut string) error {
	m, err := s.ReadMask(masks)
	if err != nil {
		return err
	}
	labels, err := m.Uint8(nil)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Mask, err)
	}
	f, _, err := regfile.Open(s.Image)
	if err != nil {
		return fmt.Errorf("data convert: %w", err)
	}
	defer f.Close()
	if err := atomicfile.WriteFunc(imgOut, 0o644, func(w io.Writer) error { _, err := io.Copy(w, f); return err }); err != nil {
		return fmt.Errorf("data convert: %w", err)
	}
	return imageio.WriteMaskPNG(maskOut, labels, m.Width, m.Height, nil)
}
