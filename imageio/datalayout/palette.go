package datalayout

import (
	"fmt"
	"image/color"
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
		if pal, err = imageio.ReadPalette(path); err != nil {
			return nil, nil, err
		}
		return pal, nil, checkRepeats(path, pal)
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

// checkRepeats refuses a palette that gives a colour to two classes with
// a new colour after the second: masks could never hold that class (a
// pixel takes the first class of its colour). A palette padded to 256
// entries with one colour repeated to its end is fine.
func checkRepeats(path string, pal imageio.Palette) error {
	first := map[color.RGBA]int{}
	repeat := -1 // the first class whose colour an earlier class has
	for i, c := range pal {
		_, seen := first[c]
		switch {
		case !seen && repeat >= 0:
			r := pal[repeat]
			return fmt.Errorf("%s: classes %d and %d have one colour (%d,%d,%d), and class %d a new one after them: masks could never hold class %d",
				path, first[r], repeat, r.R, r.G, r.B, i, repeat)
		case !seen:
			first[c] = i
		case repeat < 0:
			repeat = i
		}
	}
	return nil
}
