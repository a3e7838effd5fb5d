// Package datalayout finds the labelled samples of a data folder: which
// image goes with which label mask, in the layouts data sets come in
// (canonical image/mask folders, mmseg's img_dir/ann_dir, Cityscapes,
// Pascal VOC, ADE20K, nested folders, masks named with a suffix), and
// names every file it could not pair.
//
// A layout is a [Format]. Open detects the format of a folder (or takes
// the one asked for) and lists a split's [Sample]s. Formats that keep
// labels in something other than a mask image (annotation files: COCO,
// CVAT, Label Studio, LabelMe) plug in with [Register] and give each sample a
// Decode function that rasterises its labels.
package datalayout

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// Sample is one labelled image.
type Sample struct {
	// Image is the image file.
	Image string
	// Mask is the file the labels come from: a mask image, or an
	// annotation file when Decode is set. Errors name it.
	Mask string
	// Name identifies the sample within its set: the image's path below
	// the split's image folder, without extension and format suffix,
	// with "/" separators (e.g. "aachen/aachen_000000_000019").
	Name string
	// Decode, when set, produces the sample's labels; nil reads Mask as a
	// mask image. It must honour opt as imageio.ReadMask does (size
	// check, label map, class range): rendering the labels into an
	// image.Gray or image.Gray16 and calling imageio.MaskFromImage does.
	Decode func(opt imageio.MaskOptions) (*imageio.Mask, error)
}

// ReadMask returns the sample's labels, read through opt.
func (s Sample) ReadMask(opt imageio.MaskOptions) (*imageio.Mask, error) {
	if s.Decode != nil {
		return s.Decode(opt)
	}
	return imageio.ReadMask(s.Mask, opt)
}

// Unmatched is a file of the data set that is in no sample.
type Unmatched struct {
	Path string `json:"path"`
	// Why says what is missing, e.g. "image without a mask (want …)".
	Why string `json:"why"`
}

// Set is the samples of one split of a data folder.
type Set struct {
	// Format is the layout's name (see [Formats]).
	Format string
	// Root is the data folder; Split the split listed ("" when the
	// layout has none); Splits every split the layout has.
	Root, Split string
	Splits      []string
	// CrowdAsClass is the Options setting the set was read with.
	CrowdAsClass bool
	// Samples are sorted by Name.
	Samples []Sample
	// Unmatched lists the images without labels and the labels without
	// an image, sorted by path.
	Unmatched []Unmatched
	// LabelPreset is the imageio label map preset that the format's
	// labels usually need ("cityscapes", "ade20k", "voc"), or "".
	LabelPreset string
	// Classes names the labels of an annotation format (index = label:
	// COCO's categories, CVAT's labelmap.txt, Label Studio's brush
	// labels); nil for mask folders, whose labels have no names.
	Classes []string
	// Note is what the summary adds about how the format read the set,
	// e.g. where a LabelMe set's class order comes from; "" for none.
	Note string
}

// Summary is the one line that says what was found, e.g.
// "cityscapes layout, split val: 500 image/mask pairs".
func (s *Set) Summary() string {
	split := ""
	if s.Split != "" {
		split = ", split " + s.Split
	}
	line := fmt.Sprintf("%s: %s layout%s: %d image/mask pairs", s.Root, s.Format, split, len(s.Samples))
	if n := len(s.Unmatched); n > 0 {
		line += fmt.Sprintf(", %d unmatched %s", n, files(n))
	}
	if s.Note != "" {
		line += "; " + s.Note
	}
	return line
}

// LossyMasks lists the set's mask files stored as JPEG, whose lossy
// compression turns the labels along every edge into values near them:
// labels no class has, or a neighbouring class's.
func (s *Set) LossyMasks() []string {
	var out []string
	for _, sm := range s.Samples {
		if ext := strings.ToLower(filepath.Ext(sm.Mask)); sm.Decode == nil && (ext == ".jpg" || ext == ".jpeg") {
			out = append(out, sm.Mask)
		}
	}
	return out
}

// Notes are the lines that say what the set is: Summary, a warning about
// JPEG masks, the format's classes and, unless labelMapGiven, the label map
// preset its masks usually need, its setting named by name ({label_map}).
func (s *Set) Notes(labelMapGiven bool, name func(key string) string) []string {
	notes := []string{s.Summary()}
	if lossy := s.LossyMasks(); len(lossy) > 0 {
		notes = append(notes, fmt.Sprintf("warning: %d masks are JPEG files (%s, …): JPEG's lossy compression changes the labels along every edge; save masks as PNG",
			len(lossy), lossy[0]))
	}
	if len(s.Classes) > 0 {
		notes = append(notes, fmt.Sprintf("%s classes, label 0 up: %s", s.Format, strings.Join(s.Classes, ",")))
	}
	if p := s.LabelPreset; p != "" && !labelMapGiven && p != "voc" {
		notes = append(notes, setting.Sprintf(name, "note: %s masks usually need {label_map} %s", s.Format, p))
	}
	return notes
}

// Err names the unmatched files (an *UnmatchedError), or is nil.
func (s *Set) Err() error {
	if len(s.Unmatched) == 0 {
		return nil
	}
	return &UnmatchedError{Root: s.Root, Files: s.Unmatched}
}

// UnmatchedError is a data set with files that pair with nothing.
type UnmatchedError struct {
	Root  string
	Files []Unmatched
}

func (e *UnmatchedError) Error() string {
	const shown = 5
	parts := make([]string, 0, shown)
	for _, u := range e.Files[:min(len(e.Files), shown)] {
		parts = append(parts, u.Path+": "+u.Why)
	}
	more := ""
	if len(e.Files) > shown {
		more = fmt.Sprintf("; and %d more (segtune data check lists them all)", len(e.Files)-shown)
	}
	return fmt.Sprintf("data set %s: %d unmatched %s: %s%s", e.Root, len(e.Files), files(len(e.Files)), strings.Join(parts, "; "), more)
}

func files(n int) string {
	if n == 1 {
		return "file"
	}
	return "files"
}

// AmbiguousError is a folder that looks like several layouts at once, or
// holds several candidate folders for one role.
type AmbiguousError struct {
	Root string
	// Found names what was found, e.g. "cityscapes (leftImg8bit/, gtFine/)".
	Found []string
}

func (e *AmbiguousError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *AmbiguousError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "data set %s is ambiguous: it holds %s; name the layout with {format}, or point {data} at one of them",
		e.Root, strings.Join(e.Found, " and "))
}

// SplitError is a split the layout does not have (or a missing split
// where the layout has several).
type SplitError struct {
	Root, Format, Split string
	Have                []string
}

func (e *SplitError) Error() string { return e.Named(setting.Key) }

// Named is the message with its setting called name(key).
func (e *SplitError) Named(name func(key string) string) string {
	if e.Split == "" {
		return setting.Sprintf(name, "data set %s (%s layout) has splits %s: pick one with {split}", e.Root, e.Format, strings.Join(e.Have, ", "))
	}
	if len(e.Have) == 0 {
		return setting.Sprintf(name, "data set %s (%s layout) has no splits, and {split} %s names one", e.Root, e.Format, e.Split)
	}
	return fmt.Sprintf("data set %s (%s layout) has no split %q; it has %s", e.Root, e.Format, e.Split, strings.Join(e.Have, ", "))
}

// ErrUnknownLayout is returned (wrapped) when no format recognises a folder.
var ErrUnknownLayout = errors.New("no known data layout")

// Format is one layout of labelled data.
type Format interface {
	// Name is what --format calls the layout.
	Name() string
	// Detect says what marks root as this layout (e.g. "leftImg8bit/
	// and gtFine/"), or "" when root is not one. It looks at names, and
	// at most at the start of one file (LabelMe's JSON keys).
	Detect(root string) string
	// Splits lists the layout's splits under root; none for a layout
	// without splits.
	Splits(root string) ([]string, error)
	// List returns the samples of opt.Split (one of Splits, or "" for a
	// layout without splits), with the unmatched files.
	List(root string, opt Options) (*Set, error)
}

var (
	mu sync.RWMutex
	// registered are the formats in detection order; folders, the
	// catch-all, is tried only when no other format claims a folder.
	registered = []Format{cityscapes{}, voc{}, ade20k{}, coco{}, cvat{}, cvatXML{}, labelStudio{}, labelMe{}}
	fallback   = Format(folders{})
)

// Register adds a format (e.g. an annotation decoder's). Registering a
// name twice replaces the earlier format.
func Register(f Format) {
	mu.Lock()
	defer mu.Unlock()
	for i, g := range registered {
		if g.Name() == f.Name() {
			registered[i] = f
			return
		}
	}
	registered = append(registered, f)
}

// Formats returns the names of the known formats.
func Formats() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for _, f := range registered {
		out = append(out, f.Name())
	}
	return append(out, fallback.Name())
}

func lookup(name string) Format {
	mu.RLock()
	defer mu.RUnlock()
	for _, f := range append(slices.Clone(registered), fallback) {
		if strings.EqualFold(f.Name(), name) {
			return f
		}
	}
	return nil
}

// Options choose how Open reads a folder.
type Options struct {
	// Format names the layout; "" detects it.
	Format string
	// Split names the split; train/val/test also match their long
	// forms (training, validation, valid, testing). "" is for layouts
	// without splits.
	Split string
	// CrowdAsClass paints COCO's iscrowd regions with their category's
	// class; by default they are ignored (annot.Ignore), as crowd regions
	// mark groups no one outlined object by object.
	CrowdAsClass bool
}

// Detect returns root's format: the one format whose markers root has,
// or the canonical folders when none has; an *AmbiguousError when
// several claim it.
func Detect(root string) (Format, error) {
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	mu.RLock()
	formats := slices.Clone(registered)
	mu.RUnlock()
	var hits []Format
	var found []string
	for _, f := range formats {
		if m := f.Detect(root); m != "" {
			hits = append(hits, f)
			found = append(found, fmt.Sprintf("%s (%s)", f.Name(), m))
		}
	}
	switch len(hits) {
	case 0:
		// The canonical folders' error says what was missing, or which
		// folders made them ambiguous.
		if _, err := fallback.Splits(root); err != nil {
			return nil, err
		}
		return fallback, nil
	case 1:
		return hits[0], nil
	}
	return nil, &AmbiguousError{Root: root, Found: found}
}

// Splits returns the splits of root's layout (detected, or opt.Format).
func Splits(root string, opt Options) (Format, []string, error) {
	f, err := format(root, opt)
	if err != nil {
		return nil, nil, err
	}
	splits, err := f.Splits(root)
	return f, splits, err
}

// Open lists the samples of opt.Split in root.
func Open(root string, opt Options) (*Set, error) {
	f, splits, err := Splits(root, opt)
	if err != nil {
		return nil, err
	}
	split, err := matchSplit(splits, opt.Split)
	if err != nil {
		var se *SplitError
		if errors.As(err, &se) {
			se.Root, se.Format = root, f.Name()
		}
		return nil, err
	}
	opt.Split = split
	set, err := f.List(root, opt)
	if err != nil {
		return nil, err
	}
	set.Format, set.Root, set.Split, set.Splits = f.Name(), root, split, splits
	set.CrowdAsClass = opt.CrowdAsClass
	slices.SortFunc(set.Samples, func(a, b Sample) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(set.Unmatched, func(a, b Unmatched) int { return strings.Compare(a.Path, b.Path) })
	return set, nil
}

func format(root string, opt Options) (Format, error) {
	if opt.Format == "" {
		return Detect(root)
	}
	if err := checkRoot(root); err != nil {
		return nil, err
	}
	f := lookup(opt.Format)
	if f == nil {
		return nil, fmt.Errorf("unknown data format %q; known: %s", opt.Format, strings.Join(Formats(), ", "))
	}
	return f, nil
}

func checkRoot(root string) error {
	fi, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("data set: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("data set %s is not a folder", root)
	}
	return nil
}

// splitAliases group the names data sets give the usual splits.
var splitAliases = [][]string{
	{"train", "training"},
	{"val", "validation", "valid"},
	{"test", "testing"},
}

// sameSplit reports whether a and b name the same split.
func sameSplit(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	for _, group := range splitAliases {
		if slices.ContainsFunc(group, func(s string) bool { return strings.EqualFold(s, a) }) &&
			slices.ContainsFunc(group, func(s string) bool { return strings.EqualFold(s, b) }) {
			return true
		}
	}
	return false
}

// matchSplit returns the one of have that want names.
func matchSplit(have []string, want string) (string, error) {
	if want == "" {
		if len(have) == 0 {
			return "", nil
		}
		return "", &SplitError{Have: have}
	}
	for _, h := range have {
		if sameSplit(h, want) {
			return h, nil
		}
	}
	return "", &SplitError{Split: want, Have: have}
}

// HasSplit reports whether splits holds split (or an alias of it).
func HasSplit(splits []string, split string) bool {
	_, err := matchSplit(splits, split)
	return err == nil && split != ""
}

// CanonicalSplit is the short name of a usual split (train for training,
// val for validation or valid, test for testing), or split itself.
func CanonicalSplit(split string) string {
	for _, group := range splitAliases {
		if slices.ContainsFunc(group, func(s string) bool { return strings.EqualFold(s, split) }) {
			return group[0]
		}
	}
	return split
}
