package data

import (
	"fmt"
	"image"
	"math"
)

// Augment configures training augmentation: a random rescale, a random
// crop of the training size (padding when the rescaled image is smaller)
// and a random horizontal flip, then optional photometric changes of the
// crop (brightness, contrast, saturation, gamma, blur; see Photometric).
// Images are resampled bilinearly, masks by nearest neighbour, so labels
// are never blended.
//
// Rescale, crop and flip happen in one hand-written fused pass (render)
// rather than with imaging's Resize, Paste and FlipH, because it is 3.5–4×
// faster on this hot path: a 480×360 example and its mask cropped to
// 360×480 at scale 0.5–2 take 4.5 ms against 16.6 ms with imaging, which
// resizes the whole image first and uses both cores (medians of 5 runs of
// go test -bench Geometry ./finetune/data on the shared 2-core VM, load ≈ 10;
// 3.0 vs 11 ms when quieter). The pixels differ too: imaging's Linear
// filter is not the half-pixel bilinear sampling used everywhere else.
type Augment struct {
	// Height and Width are the crop, i.e. the training graph's input size.
	// Zero takes the loader's Preprocess Height and Width.
	Height, Width int
	// ScaleMin and ScaleMax bound the uniform random scale applied to the
	// native size before cropping, e.g. 0.5 and 2.0; zero means 1.
	ScaleMin, ScaleMax float64
	// Flip mirrors half of the examples left to right.
	Flip bool
	// WholeFrame shows the network the whole image instead of a crop: it
	// is rescaled to fit inside Height×Width with its aspect ratio kept,
	// centred (the rest padded, the mask ignored there) and flipped as
	// Flip says; ScaleMin and ScaleMax are not used. The size regularizer
	// trains this way, so that an image's size label, measured on its
	// whole mask, describes what the network sees (docs/method.md §1).
	WholeFrame bool `json:"whole_frame,omitempty"`
	// PadColor fills the image where the crop extends past the rescaled
	// image (the mask gets the ignore label there); nil uses the colour
	// the normalisation maps closest to 0, i.e. the mean.
	PadColor *[3]uint8
	// Photometric holds the colour and blur augmentations (photometric.go);
	// its zero value turns them off and leaves every batch as it was.
	Photometric
	// Geometric holds the rotation, shear, translation and cutout of the
	// crop (geometric.go), applied before Photometric; its zero value
	// turns them off and leaves every batch as it was.
	Geometric
}

// maxCropSide bounds crop sides like imageio bounds tensor sides.
const maxCropSide = 1 << 15

// maxScale bounds ScaleMax so a typo cannot ask for gigapixel images.
const maxScale = 16

// crop is one example's random choices, in rescaled-image pixels.
type crop struct {
	sw, sh int  // rescaled size
	x0, y0 int  // crop origin in the rescaled image; negative pads
	flip   bool // mirror the crop horizontally
}

func (a *Augment) validate() error {
	if a.Height <= 0 || a.Width <= 0 || a.Height > maxCropSide || a.Width > maxCropSide {
		return fmt.Errorf("augment: crop size %dx%d (HxW) must be within 1..%d", a.Height, a.Width, maxCropSide)
	}
	lo, hi := a.scales()
	if !(lo > 0) || !(hi >= lo) || hi > maxScale {
		return fmt.Errorf("augment: scale range %v..%v must satisfy 0 < min <= max <= %d", a.ScaleMin, a.ScaleMax, maxScale)
	}
	if err := a.Geometric.validate(); err != nil {
		return err
	}
	return a.Photometric.validate()
}

func (a *Augment) scales() (lo, hi float64) {
	lo, hi = a.ScaleMin, a.ScaleMax
	if lo == 0 {
		lo = 1
	}
	if hi == 0 {
		hi = max(lo, 1)
	}
	return lo, hi
}

// draw makes the random choices for a w×h image, always in the same order
// (scale, x, y, flip) so they depend only on the generator's seed.
func (a *Augment) draw(r *rng, w, h int) crop {
	if a.WholeFrame {
		s := math.Min(float64(a.Width)/float64(w), float64(a.Height)/float64(h))
		c := crop{
			sw: min(max(int(math.Round(float64(w)*s)), 1), a.Width),
			sh: min(max(int(math.Round(float64(h)*s)), 1), a.Height),
		}
		c.x0, c.y0 = -(a.Width-c.sw)/2, -(a.Height-c.sh)/2
		c.flip = a.Flip && r.pcg.Uint64()>>63 == 1
		return c
	}
	lo, hi := a.scales()
	s := lo + (hi-lo)*r.float64()
	c := crop{
		sw: max(int(math.Round(float64(w)*s)), 1),
		sh: max(int(math.Round(float64(h)*s)), 1),
	}
	c.x0 = offset(r, c.sw, a.Width)
	c.y0 = offset(r, c.sh, a.Height)
	c.flip = a.Flip && r.pcg.Uint64()>>63 == 1
	return c
}

// offset picks where a crop of n samples starts in a side of size, so
// that the crop lies inside the image or, when the image is smaller,
// the image lies inside the crop.
func offset(r *rng, size, n int) int {
	lo, hi := min(0, size-n), max(0, size-n)
	return lo + r.intn(hi-lo+1)
}

// taps maps crop samples onto source samples for one axis.
type taps struct {
	valid   []bool
	i0, i1  []int    // bilinear source indices
	w       []uint32 // weight of i1 in 1/fixOne
	nearest []int    // mask source index
}

// fixBits is the fixed-point precision of bilinear weights: 11 bits keep
// 255·2^22 inside uint32 for the two-pass blend.
const (
	fixBits = 11
	fixOne  = 1 << fixBits
)

// axisTaps computes the taps for n crop samples of a side of src source
// samples rescaled to scaled, starting at off, optionally mirrored.
// Sampling uses half-pixel centres, like imageio's resampler.
func axisTaps(t *taps, src, scaled, n, off int, flip bool) {
	t.valid = grow(t.valid, n)
	t.i0, t.i1, t.nearest = grow(t.i0, n), grow(t.i1, n), grow(t.nearest, n)
	t.w = grow(t.w, n)
	ratio := float64(src) / float64(scaled)
	for o := range n {
		c := o
		if flip {
			c = n - 1 - o
		}
		x := c + off
		t.valid[o] = x >= 0 && x < scaled
		if !t.valid[o] {
			continue
		}
		s := max((float64(x)+0.5)*ratio-0.5, 0)
		k := int(s)
		f := s - float64(k)
		if k >= src-1 {
			k, f = src-1, 0
		}
		t.i0[o], t.i1[o] = k, min(k+1, src-1)
		t.w[o] = uint32(math.Round(f * fixOne))
		t.nearest[o] = min(int(math.Floor((float64(x)+0.5)*ratio)), src-1)
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// augmentScratch is a worker's reusable state.
type augmentScratch struct {
	xt, yt taps
	img    *image.RGBA
	// srcPix and srcMask hold the crop that Geometric warps.
	srcPix  []uint8
	srcMask []int64
}

// render writes the crop c of sample s into sc.img (Width×Height RGBA,
// bilinear) and mask (nearest), padding with pad and ignore.
func (a *Augment) render(s Sample, c crop, pad [3]uint8, ignore uint8, sc *augmentScratch, mask []int64) *image.RGBA {
	cw, ch := a.Width, a.Height
	axisTaps(&sc.xt, s.Width, c.sw, cw, c.x0, c.flip)
	axisTaps(&sc.yt, s.Height, c.sh, ch, c.y0, false)
	if sc.img == nil || sc.img.Rect.Dx() != cw || sc.img.Rect.Dy() != ch {
		sc.img = image.NewRGBA(image.Rect(0, 0, cw, ch))
	}
	xt, yt := &sc.xt, &sc.yt
	stride := 3 * s.Width
	for oy := range ch {
		out := sc.img.Pix[oy*sc.img.Stride : oy*sc.img.Stride+4*cw]
		mrow := mask[oy*cw : (oy+1)*cw]
		if !yt.valid[oy] {
			fillRow(out, mrow, pad, ignore)
			continue
		}
		r0 := s.RGB[yt.i0[oy]*stride : (yt.i0[oy]+1)*stride]
		r1 := s.RGB[yt.i1[oy]*stride : (yt.i1[oy]+1)*stride]
		wy := yt.w[oy]
		lrow := s.Labels[yt.nearest[oy]*s.Width : (yt.nearest[oy]+1)*s.Width]
		for ox := range cw {
			px := out[4*ox : 4*ox+4 : 4*ox+4]
			if !xt.valid[ox] {
				px[0], px[1], px[2], px[3] = pad[0], pad[1], pad[2], 0xff
				mrow[ox] = int64(ignore)
				continue
			}
			i0, i1, wx := 3*xt.i0[ox], 3*xt.i1[ox], xt.w[ox]
			p0, p1 := r0[i0:i0+3:i0+3], r0[i1:i1+3:i1+3]
			q0, q1 := r1[i0:i0+3:i0+3], r1[i1:i1+3:i1+3]
			for k := range 3 {
				top := uint32(p0[k])*(fixOne-wx) + uint32(p1[k])*wx
				bot := uint32(q0[k])*(fixOne-wx) + uint32(q1[k])*wx
				px[k] = uint8((top*(fixOne-wy) + bot*wy + 1<<(2*fixBits-1)) >> (2 * fixBits))
			}
			px[3] = 0xff
			mrow[ox] = int64(lrow[xt.nearest[ox]])
		}
	}
	return sc.img
}

func fillRow(out []uint8, mask []int64, pad [3]uint8, ignore uint8) {
	for x := range mask {
		out[4*x], out[4*x+1], out[4*x+2], out[4*x+3] = pad[0], pad[1], pad[2], 0xff
		mask[x] = int64(ignore)
	}
}
