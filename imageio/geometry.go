package imageio

import (
	"fmt"
	"image"
	"math"

	"github.com/segtune/segtune/internal/memlimit"
)

// maxTensorSide bounds tensor sides so size arithmetic cannot overflow and a
// typo (scale_factor 60 on a large photo) fails clearly instead of
// allocating gigabytes.
const maxTensorSide = 1 << 15

// Geometry records how an image of SrcWidth×SrcHeight maps into a tensor of
// Width×Height: the image is resampled into Content and the rest (letterbox
// borders) is padding. It is what [Geometry.RestoreLogits] needs to map
// model outputs back onto the original image.
type Geometry struct {
	SrcWidth, SrcHeight int
	Width, Height       int
	Content             image.Rectangle
}

// Len is the number of float32 values of one tensor slot: 3·Width·Height.
func (g Geometry) Len() int { return Channels * g.Width * g.Height }

// Identity reports whether the tensor is the image at its native size.
func (g Geometry) Identity() bool {
	return g.Width == g.SrcWidth && g.Height == g.SrcHeight &&
		g.Content == image.Rect(0, 0, g.Width, g.Height)
}

// Geometry computes the tensor geometry for an image of srcW×srcH.
func (p *Preprocess) Geometry(srcW, srcH int) (Geometry, error) {
	pl, err := p.plan()
	if err != nil {
		return Geometry{}, err
	}
	return pl.geometry(p, srcW, srcH)
}

func (pl *plan) geometry(p *Preprocess, srcW, srcH int) (Geometry, error) {
	g := Geometry{SrcWidth: srcW, SrcHeight: srcH}
	if srcW <= 0 || srcH <= 0 {
		return g, fmt.Errorf("preprocess: invalid image size %dx%d", srcW, srcH)
	}
	switch pl.resize {
	case ResizeNone:
		g.Width, g.Height = srcW, srcH
		if (p.Width != 0 && p.Width != srcW) || (p.Height != 0 && p.Height != srcH) {
			return g, fmt.Errorf("preprocess: resize none keeps the image size %dx%d (WxH) but height/width ask for %dx%d",
				srcW, srcH, p.Width, p.Height)
		}
	case ResizeStretch:
		g.Width, g.Height = p.Width, p.Height
	case ResizeScale:
		g.Width = scaledSide(srcW, p)
		g.Height = scaledSide(srcH, p)
	case ResizeLetterbox:
		g.Width, g.Height = p.Width, p.Height
		s := math.Min(float64(p.Width)/float64(srcW), float64(p.Height)/float64(srcH))
		cw := min(max(int(math.Round(float64(srcW)*s)), 1), p.Width)
		ch := min(max(int(math.Round(float64(srcH)*s)), 1), p.Height)
		x0, y0 := (p.Width-cw)/2, (p.Height-ch)/2
		if pl.topLeft {
			x0, y0 = 0, 0
		}
		g.Content = image.Rect(x0, y0, x0+cw, y0+ch)
	}
	if g.Width > maxTensorSide || g.Height > maxTensorSide || g.Width <= 0 || g.Height <= 0 {
		return g, fmt.Errorf("preprocess: tensor size %dx%d (WxH) for a %dx%d image is out of range 1..%d",
			g.Width, g.Height, srcW, srcH, maxTensorSide)
	}
	if pl.resize != ResizeLetterbox {
		g.Content = image.Rect(0, 0, g.Width, g.Height)
	}
	if err := checkTensorMemory(g); err != nil {
		return g, err
	}
	return g, nil
}

func scaledSide(n int, p *Preprocess) int {
	v := math.Round(float64(n) * p.ScaleFactor)
	if v < 1 {
		v = 1
	}
	if v > maxTensorSide { // avoid int overflow; rejected by the caller
		return maxTensorSide + 1
	}
	s := int(v)
	if p.MultipleOf > 1 {
		s = (s + p.MultipleOf - 1) / p.MultipleOf * p.MultipleOf
	}
	if p.PlusOne {
		s++
	}
	return s
}

// tensorsInFlight is how many input tensors a pipeline holds at once, at
// the least (one per prepare worker and a queued batch).
const tensorsInFlight = 4

// FixTensors is the advice on input tensors over the memory limit
// (memlimit.TooLargeError's Fix).
const FixTensors = "lower {size} or {scale}"

// checkTensorMemory refuses a tensor geometry whose float32 tensors, a few
// at a time, would exceed the memory limit.
func checkTensorMemory(g Geometry) error {
	bytes := memlimit.Product(int64(g.Width), int64(g.Height), Channels, 4, tensorsInFlight)
	if !memlimit.Exceeds(bytes) {
		return nil
	}
	return memlimit.Check(fmt.Sprintf("preprocess: %dx%d (WxH) input tensors for a %dx%d image", g.Width, g.Height, g.SrcWidth, g.SrcHeight),
		bytes, FixTensors)
}
