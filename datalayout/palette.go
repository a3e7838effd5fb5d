package datalayout

import (
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
)

// ReadMaskPalette reads the colours that RGB colour masks give their
// classes in (colour i is class i): a CVAT labelmap.txt (a .txt file),
// which also names the classes, or a palette image as imageio.ReadPalette
// reads it (names nil). Single-channel and palette PNG masks need none.
func ReadMaskPalette(path string) (pal imageio.Palette, names []string, err error) {
	if !strings.EqualFold(filepath.Ext(path), ".txt") {
		pal, err = imageio.ReadPalette(path)
		return pal, nil, err
	}
	labels, err := annot.ReadCVATLabelmap(path)
	if err != nil {
		return nil, nil, err
	}
	for _, l := range labels {
		pal = append(pal, l.Colour)
		names = append(names, l.Name)
	}
	return pal, names, nil
}
