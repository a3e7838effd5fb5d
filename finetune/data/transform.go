package data

import (
	"image"
	"math"
	"strings"

	"github.com/segtune/segtune/imageio"
)

// pipeline turns a Sample into one batch slot: augmentation (training) or
// a fixed geometry (evaluation), then imageio's normalisation.
type pipeline struct {
	aug    *Augment           // nil in evaluation
	pre    imageio.Preprocess // training: normalisation only (resize none)
	pad    [3]uint8
	ignore uint8
}

func newPipeline(aug *Augment, pre imageio.Preprocess, ignore uint8) (*pipeline, error) {
	if err := pre.Validate(); err != nil {
		return nil, err
	}
	p := &pipeline{pre: pre, ignore: ignore}
	if aug != nil {
		a := *aug
		if a.Height == 0 && a.Width == 0 {
			a.Height, a.Width = pre.Height, pre.Width
		}
		if err := a.validate(); err != nil {
			return nil, err
		}
		p.aug = &a
		// The crop already has the training size: imageio only normalises.
		p.pre.Resize, p.pre.Height, p.pre.Width = imageio.ResizeNone, 0, 0
		p.pre.ScaleFactor, p.pre.MultipleOf, p.pre.PlusOne = 0, 0, false
		p.pad = zeroColor(&pre)
		if a.PadColor != nil {
			p.pad = *a.PadColor
		}
	}
	if err := p.pre.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// size returns the tensor height and width for an example of w×h.
func (p *pipeline) size(w, h int) (height, width int, err error) {
	if p.aug != nil {
		return p.aug.Height, p.aug.Width, nil
	}
	g, err := p.pre.Geometry(w, h)
	return g.Height, g.Width, err
}

// slotScratch is one worker's reusable buffers.
type slotScratch struct {
	augmentScratch
	full   *image.RGBA // evaluation: the whole image as RGBA
	labels []uint8     // evaluation: the projected mask
}

// apply fills img (3·H·W) and mask (H·W) from s. r is only drawn from in
// training. The geometry says how the slot maps onto the image
// (meaningful in evaluation only).
func (p *pipeline) apply(s Sample, r *rng, img []float32, mask []int64, sc *slotScratch) (imageio.Geometry, error) {
	if p.aug != nil {
		c := p.aug.draw(r, s.Width, s.Height)
		crop := p.aug.render(s, c, p.pad, p.ignore, &sc.augmentScratch, mask)
		p.aug.geometric(r, crop, mask, p.pad, p.ignore, &sc.augmentScratch)
		p.aug.photometric(r, crop)
		return p.pre.Tensor(crop, img)
	}
	sc.full = rgbaOf(s, sc.full)
	g, err := p.pre.Tensor(sc.full, img)
	if err != nil {
		return g, err
	}
	sc.labels = grow(sc.labels, g.Width*g.Height)
	if err := imageio.ProjectLabels(g, s.Labels, sc.labels, p.ignore); err != nil {
		return g, err
	}
	for i, l := range sc.labels {
		mask[i] = int64(l)
	}
	return g, nil
}

// rgbaOf expands packed RGB into an opaque RGBA image, reusing buf.
func rgbaOf(s Sample, buf *image.RGBA) *image.RGBA {
	n := 4 * s.Width * s.Height
	if buf == nil || cap(buf.Pix) < n {
		buf = &image.RGBA{Pix: make([]uint8, n)}
	}
	buf.Pix, buf.Stride, buf.Rect = buf.Pix[:n], 4*s.Width, image.Rect(0, 0, s.Width, s.Height)
	for i := range s.Width * s.Height {
		d := buf.Pix[4*i : 4*i+4 : 4*i+4]
		src := s.RGB[3*i : 3*i+3 : 3*i+3]
		d[0], d[1], d[2], d[3] = src[0], src[1], src[2], 0xff
	}
	return buf
}

// zeroColor returns the RGB byte colour that p normalises closest to 0:
// the data set mean for mean/std, 127.5 → 128 for x/127.5 − 1. Padding
// with it makes the padded area neutral input.
func zeroColor(p *imageio.Preprocess) [3]uint8 {
	var v [3]float64 // tensor channel order
	if len(p.Mean) == imageio.Channels {
		unit := 255.0
		if p.MeanStdRange == imageio.RangeByte {
			unit = 1
		}
		for t := range v {
			v[t] = p.Mean[t] * unit
		}
	} else if len(p.Mean) == 0 && len(p.Std) == 0 && p.MeanStdRange == "" {
		s := p.ValueScale
		if s == 0 {
			s = 1
		}
		for t := range v {
			v[t] = -p.ValueOffset / s
		}
	}
	if strings.EqualFold(string(p.ChannelOrder), string(imageio.BGR)) {
		v[0], v[2] = v[2], v[0]
	}
	var out [3]uint8
	for c, x := range v {
		out[c] = uint8(min(max(math.Round(x), 0), 255))
	}
	return out
}
