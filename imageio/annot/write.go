package annot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The writers turn a model's predicted label maps into the files a
// labelling tool imports as pre-annotations, one file per format, each
// read back by this package's reader of that format. Class 0 (background)
// and Ignore are never exported: they are what no annotation covers.

// Prediction is one image's predicted label map.
type Prediction struct {
	// Image is the image's path relative to the folder of images,
	// slash-separated ("a/x.jpg").
	Image string
	// Width, Height and Labels (row-major class indices) are the map.
	Width, Height int
	Labels        []uint8
}

// Name is the image's path without its extension ("a/x").
func (p Prediction) Name() string {
	return strings.TrimSuffix(p.Image, filepath.Ext(p.Image))
}

// WriteOptions are what every writer needs.
type WriteOptions struct {
	// Classes names the classes by index (the model's class names);
	// Classes[0] is the background and is not exported.
	Classes []string
}

// A Writer takes the predictions of a run one image at a time; Close
// writes what is left (the one file of COCO and Label Studio).
type Writer interface {
	Add(p Prediction) error
	Close() error
}

// check refuses a prediction the writers cannot export: a size that
// does not match its labels, a class without a name, a bad image path.
func (o WriteOptions) check(p Prediction) error {
	if len(o.Classes) < 2 {
		return fmt.Errorf("write annotations: %d class names; need the background and at least one class", len(o.Classes))
	}
	if p.Width <= 0 || p.Height <= 0 || len(p.Labels) != p.Width*p.Height {
		return fmt.Errorf("write annotations for %s: %d labels for a %dx%d image", p.Image, len(p.Labels), p.Width, p.Height)
	}
	if p.Image == "" || strings.HasPrefix(p.Image, "/") || strings.Contains(p.Image, `\`) || strings.HasPrefix(p.Image, "../") || p.Image == ".." {
		return fmt.Errorf("write annotations: image path %q is not a relative slash-separated path", p.Image)
	}
	for _, v := range p.Labels {
		if v != Ignore && int(v) >= len(o.Classes) {
			return fmt.Errorf("write annotations for %s: class %d has no name (%d class names)", p.Image, v, len(o.Classes))
		}
	}
	return nil
}

// exported lists the classes of labels that are exported, in index order.
func exported(labels []uint8) []uint8 {
	var seen [256]bool
	for _, v := range labels {
		seen[v] = true
	}
	var out []uint8
	for c := 1; c < Ignore; c++ {
		if seen[c] {
			out = append(out, uint8(c))
		}
	}
	return out
}

// makeParent makes the folder of path.
func makeParent(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write annotations: %w", err)
	}
	return nil
}
