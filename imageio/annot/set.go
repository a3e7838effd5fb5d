package annot

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
)

// Ignore is the mask value of pixels that no class covers for training
// and scoring: COCO crowd regions by default, unknown CVAT colours when
// asked, uncovered pixels without a background class.
const Ignore = 255

// MaxClasses is the most classes a Set can have: indices 0..254, since
// 255 is Ignore.
const MaxClasses = 255

// Set is what a decoder read from one export.
type Set struct {
	// Source is the annotation file or folder that was read.
	Source string
	// Classes names the class indices of the masks.
	Classes []string
	// Samples has one entry per annotated image, in the export's order.
	Samples []Sample
	// Unlabelled names the images the export lists without annotations
	// (Label Studio tasks nobody annotated): not samples, but reported.
	Unlabelled []string
}

// Sample is one annotated image.
type Sample struct {
	// Image is the path of the image file: the export's reference to it
	// joined to the image folder the caller gave, or "" when the export
	// does not say (a CVAT export saved without images).
	Image string
	// Ref is the image as the export names it: COCO's file_name, Label
	// Studio's data URL, the CVAT mask's path under SegmentationClass
	// without its extension.
	Ref string
	// Width and Height are the mask's size, which its image must have.
	Width, Height int

	mask func() ([]uint8, error)
}

// Mask produces the sample's class-index mask: Width×Height bytes in
// row-major order, each a class index or Ignore. It may be called more
// than once and from several goroutines; each call returns a new slice.
func (s Sample) Mask() ([]uint8, error) {
	if s.mask == nil {
		return nil, fmt.Errorf("annotation sample %q has no mask decoder", s.Ref)
	}
	return s.mask()
}

// Error reports bad annotation data: the file, the item in it (an
// annotation id, a task, a pixel) and what is wrong.
type Error struct {
	File string
	Item string
	Msg  string
}

func (e *Error) Error() string {
	if e.Item == "" {
		return e.File + ": " + e.Msg
	}
	return e.File + ": " + e.Item + ": " + e.Msg
}

func errorf(file, item, format string, args ...any) *Error {
	return &Error{File: file, Item: item, Msg: fmt.Sprintf(format, args...)}
}

// joinImage joins an image reference from an export to dir, refusing
// absolute references and ones that climb out of dir: an annotation file
// decides which files are read.
func joinImage(dir, ref string) (string, error) {
	p := path.Clean(strings.ReplaceAll(ref, `\`, "/"))
	if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || filepath.IsAbs(ref) {
		return "", fmt.Errorf("image %q is not a path inside the image folder", ref)
	}
	if dir == "" {
		return filepath.FromSlash(p), nil
	}
	return filepath.Join(dir, filepath.FromSlash(p)), nil
}
