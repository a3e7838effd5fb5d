package annot

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
)

// CVATLabel is one line of a CVAT (Datumaro VOC) labelmap.txt.
type CVATLabel struct {
	Name   string
	Colour color.RGBA
}

// CVATOptions controls how a CVAT "Segmentation mask 1.1" export becomes
// masks.
type CVATOptions struct {
	// IgnoreUnknownColours makes pixels whose colour labelmap.txt does
	// not list Ignore; by default such a pixel is an
	// [UnknownColourError].
	IgnoreUnknownColours bool
	// Decoder sets the pixel limit for reading masks.
	Decoder imageio.Decoder
}

// UnknownColourError reports a mask pixel whose colour is not in
// labelmap.txt.
type UnknownColourError struct {
	File   string
	X, Y   int
	Colour color.RGBA
}

func (e *UnknownColourError) Error() string {
	return fmt.Sprintf("%s: pixel (%d,%d) has colour %d,%d,%d, which labelmap.txt does not list",
		e.File, e.X, e.Y, e.Colour.R, e.Colour.G, e.Colour.B)
}

// ReadCVATLabelmap reads a labelmap.txt as CVAT writes it:
//
//	# label:color_rgb:parts:actions
//	background:0,0,0::
//	car:250,50,83::
//
// Lines starting with '#' are comments; the class index of a label is
// its position among the label lines.
func ReadCVATLabelmap(path string) ([]CVATLabel, error) {
	data, err := regfile.ReadSmall(path, regfile.SmallLimit)
	if err != nil {
		return nil, fmt.Errorf("read CVAT labelmap: %w", err)
	}
	return parseCVATLabelmap(data, path)
}

// parseCVATLabelmap parses labelmap.txt's contents; path names it in
// errors. It keeps no more than it returns: labels past MaxClasses are
// refused as they come, and a line is split only as far as its name and
// colour.
func parseCVATLabelmap(data []byte, path string) ([]CVATLabel, error) {
	var labels []CVATLabel
	names := map[string]bool{}
	colours := map[color.RGBA]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		item := "line " + strconv.Itoa(n)
		fields := strings.SplitN(line, ":", 3)
		if len(fields) < 2 || fields[0] == "" {
			return nil, errorf(path, item, "%q is not label:r,g,b:parts:actions", line)
		}
		c, err := parseRGB(fields[1])
		if err != nil {
			return nil, errorf(path, item, "label %q: %v", fields[0], err)
		}
		if names[fields[0]] {
			return nil, errorf(path, item, "label %q appears twice", fields[0])
		}
		if other, dup := colours[c]; dup {
			return nil, errorf(path, item, "label %q has the colour of %q", fields[0], other)
		}
		if len(labels) == MaxClasses {
			return nil, errorf(path, item, "more than %d labels do not fit in a byte mask", MaxClasses)
		}
		names[fields[0]], colours[c] = true, fields[0]
		labels = append(labels, CVATLabel{Name: fields[0], Colour: c})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read CVAT labelmap %s: %w", path, err)
	}
	if len(labels) == 0 {
		return nil, errorf(path, "", "lists no labels")
	}
	return labels, nil
}

func parseRGB(s string) (color.RGBA, error) {
	parts := strings.SplitN(s, ",", 4)
	if len(parts) != 3 {
		return color.RGBA{}, fmt.Errorf("colour %q is not r,g,b", s)
	}
	var v [3]uint8
	for i, p := range parts {
		n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 8)
		if err != nil {
			return color.RGBA{}, fmt.Errorf("colour %q is not r,g,b with each 0..255", s)
		}
		v[i] = uint8(n)
	}
	return color.RGBA{v[0], v[1], v[2], 0xff}, nil
}

// ReadCVAT reads a CVAT "Segmentation mask 1.1" export unpacked in dir:
// labelmap.txt and the colour masks SegmentationClass/**/*.png. A mask's
// image is the file with the same path and stem under JPEGImages/ (CVAT
// saves it there when asked to save images); without one, Sample.Image
// is "" and Sample.Ref names the stem to pair by. Samples are in path
// order; each mask's size is read from its header now, its pixels when
// Mask is called.
func ReadCVAT(dir string, opt CVATOptions) (*Set, error) {
	labels, err := ReadCVATLabelmap(filepath.Join(dir, "labelmap.txt"))
	if err != nil {
		return nil, err
	}
	set := &Set{Source: dir}
	for _, l := range labels {
		set.Classes = append(set.Classes, l.Name)
	}
	maskDir := filepath.Join(dir, "SegmentationClass")
	images, err := imagesByStem(filepath.Join(dir, "JPEGImages"))
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(maskDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.EqualFold(filepath.Ext(p), ".png") {
			return nil
		}
		rel, err := filepath.Rel(maskDir, p)
		if err != nil {
			return err
		}
		w, h, err := maskSize(p, opt.Decoder)
		if err != nil {
			return err
		}
		stem := filepath.ToSlash(strings.TrimSuffix(rel, filepath.Ext(rel)))
		set.Samples = append(set.Samples, Sample{
			Image: images[stem], Ref: stem, Width: w, Height: h,
			mask: func() ([]uint8, error) { return ReadCVATMask(p, labels, opt) },
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read CVAT export: %w", err)
	}
	if len(set.Samples) == 0 {
		return nil, errorf(maskDir, "", "holds no PNG masks")
	}
	return set, nil
}

// imagesByStem maps the slash-separated path of each image under dir,
// without its extension, to its path; a missing dir maps nothing.
func imagesByStem(dir string) (map[string]string, error) {
	images := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !imageio.IsImageFile(p) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		stem := filepath.ToSlash(strings.TrimSuffix(rel, filepath.Ext(rel)))
		if other, dup := images[stem]; dup {
			return fmt.Errorf("images %s and %s have the same name", other, p)
		}
		images[stem] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read CVAT export: %w", err)
	}
	return images, nil
}

func maskSize(path string, dec imageio.Decoder) (int, int, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	cfg, _, err := dec.Config(f, path)
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

// ReadCVATMask reads one CVAT colour mask and maps each pixel's colour to
// the index of its label in labels.
func ReadCVATMask(path string, labels []CVATLabel, opt CVATOptions) ([]uint8, error) {
	img, err := opt.Decoder.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CVAT mask: %w", err)
	}
	return cvatClasses(img, path, labels, opt.IgnoreUnknownColours)
}

func cvatClasses(img image.Image, name string, labels []CVATLabel, ignoreUnknown bool) ([]uint8, error) {
	index := make(map[[3]uint8]uint8, len(labels))
	for i, l := range labels {
		index[[3]uint8{l.Colour.R, l.Colour.G, l.Colour.B}] = uint8(i)
	}
	b := img.Bounds()
	w := b.Dx()
	out := make([]uint8, w*b.Dy())
	// One-entry cache: masks are made of large flat regions.
	var last [3]uint8
	lastClass, cached := uint8(0), false
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			n := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			c := [3]uint8{n.R, n.G, n.B}
			if !cached || c != last {
				k, ok := index[c]
				if !ok {
					if !ignoreUnknown {
						return nil, &UnknownColourError{File: name, X: x - b.Min.X, Y: y - b.Min.Y, Colour: color.RGBA{c[0], c[1], c[2], 0xff}}
					}
					k = Ignore
				}
				last, lastClass, cached = c, k, true
			}
			out[(y-b.Min.Y)*w+x-b.Min.X] = lastClass
		}
	}
	return out, nil
}
