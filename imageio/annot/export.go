package annot

import (
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
)

// writeFormat is one pre-annotation format of the registry below: its
// name, what it writes below the export folder (slash-separated), and how
// its writer is made for that target.
type writeFormat struct {
	name, target string
	open         func(target string, opt ExportOptions) (Writer, error)
}

// writeFormats are the writers, by name. "cvat" is CVAT's "Segmentation
// mask 1.1" (colour masks), "cvat-xml" its "CVAT for images 1.1" XML.
var writeFormats = []writeFormat{
	{"coco", "coco/annotations.json", func(t string, o ExportOptions) (Writer, error) {
		return NewCOCOWriter(t, o.WriteOptions), nil
	}},
	{"cvat", "cvat", func(t string, o ExportOptions) (Writer, error) {
		return NewCVATWriter(t, o.Palette, o.WriteOptions)
	}},
	{"cvat-xml", "cvat-xml/annotations.xml", func(t string, o ExportOptions) (Writer, error) {
		return NewCVATXMLWriter(t, o.WriteOptions), nil
	}},
	{"labelme", "labelme", func(t string, o ExportOptions) (Writer, error) {
		return NewLabelMeWriter(t, o.ImageDir, o.WriteOptions), nil
	}},
	{"labelstudio", "labelstudio/tasks.json", func(t string, o ExportOptions) (Writer, error) {
		prefix := o.LabelStudioPrefix
		if prefix == "" {
			prefix = DefaultLabelStudioPrefix
		}
		return NewLabelStudioWriter(t, prefix, o.WriteOptions), nil
	}},
}

// WriteFormats are the pre-annotation formats the writers write.
var WriteFormats = func() []string {
	var out []string
	for _, f := range writeFormats {
		out = append(out, f.name)
	}
	return out
}()

func lookupWriteFormat(name string) (writeFormat, bool) {
	i := slices.IndexFunc(writeFormats, func(f writeFormat) bool { return f.name == name })
	if i < 0 {
		return writeFormat{}, false
	}
	return writeFormats[i], true
}

// ParseWriteFormats reads a comma-separated list of WriteFormats.
func ParseWriteFormats(list string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch {
		case f == "":
		case !slices.Contains(WriteFormats, f):
			return nil, fmt.Errorf("%q is not one of %s", f, strings.Join(WriteFormats, ", "))
		case !slices.Contains(out, f):
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("names no format (%s)", strings.Join(WriteFormats, ", "))
	}
	return out, nil
}

// ExportOptions say where the formats are written.
type ExportOptions struct {
	WriteOptions
	Formats []string
	// Dir is the folder that gets a sub-folder per format (ExportTargets).
	Dir string
	// ImageDir is the folder of the images, for LabelMe's imagePath.
	ImageDir string
	// Palette colours CVAT's masks (nil: Pascal VOC's).
	Palette imageio.Palette
	// LabelStudioPrefix starts Label Studio's image URLs; "" is
	// DefaultLabelStudioPrefix.
	LabelStudioPrefix string
}

// ExportTargets are the files and folders that the formats write in dir
// (coco/annotations.json, cvat-xml/annotations.xml, labelstudio/tasks.json,
// cvat/, labelme/); an unknown format's is dir/FORMAT.
func ExportTargets(dir string, formats []string) []string {
	var out []string
	for _, name := range formats {
		target := name
		if f, ok := lookupWriteFormat(name); ok {
			target = f.target
		}
		out = append(out, filepath.Join(dir, filepath.FromSlash(target)))
	}
	return out
}

// NewExport is a Writer that writes every format of opt.
func NewExport(opt ExportOptions) (Writer, error) {
	if len(opt.Classes) < 2 {
		return nil, fmt.Errorf("write annotations: %d class names; need the background and at least one class", len(opt.Classes))
	}
	var ws multiWriter
	targets := ExportTargets(opt.Dir, opt.Formats)
	for i, name := range opt.Formats {
		f, ok := lookupWriteFormat(name)
		if !ok {
			return nil, fmt.Errorf("write annotations: unknown format %q", name)
		}
		w, err := f.open(targets[i], opt)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	return ws, nil
}

type multiWriter []Writer

func (m multiWriter) Add(p Prediction) error {
	for _, w := range m {
		if err := w.Add(p); err != nil {
			return err
		}
	}
	return nil
}

func (m multiWriter) Close() error {
	var errs []error
	for _, w := range m {
		errs = append(errs, w.Close())
	}
	return errors.Join(errs...)
}

// AddMasks gives w the label map of each image that images names (a
// path below the image folder, slash-separated), read from the mask file
// maskOf names; an image without a mask file (one that failed) is
// skipped. It returns how many images it added.
func AddMasks(w Writer, images iter.Seq2[string, error], maskOf func(image string) string) (int, error) {
	n := 0
	for image, err := range images {
		if err != nil {
			return n, err
		}
		m, err := imageio.ReadMask(maskOf(image), imageio.MaskOptions{})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return n, err
		}
		labels := make([]uint8, len(m.Labels))
		for i, v := range m.Labels {
			if v < 0 || v > Ignore {
				return n, fmt.Errorf("write annotations for %s: mask %s has label %d", image, maskOf(image), v)
			}
			labels[i] = uint8(v)
		}
		if err := w.Add(Prediction{Image: image, Width: m.Width, Height: m.Height, Labels: labels}); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
