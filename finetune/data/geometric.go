package data

import (
	"fmt"
	"image"
	"math"
)

// Geometric configures the affine and cutout augmentation of training
// crops (mmseg's RandomRotate, albumentations' Affine and CoarseDropout):
// each crop is rotated, sheared and translated about its centre by
// amounts drawn uniformly per example, the image resampled bilinearly and
// the mask by nearest neighbour, so labels are never blended; pixels the
// moved crop leaves uncovered get the pad colour and the ignore label.
// Then Cutout rectangles are filled with the pad colour and ignored in
// the mask (the network cannot see what is under them). The draws follow
// the crop's and precede the photometric ones in the example's random
// stream; with every field 0 (the default) nothing is drawn and runs are
// unchanged seed for seed.
type Geometric struct {
	// Rotate r turns the crop by an angle uniform in [−r, r] degrees;
	// r in [0, 180].
	Rotate float64 `json:"rotate,omitempty"`
	// Shear s shears it horizontally by an angle uniform in [−s, s]
	// degrees; s in [0, 45].
	Shear float64 `json:"shear,omitempty"`
	// Translate t moves it by up to t of its width and of its height
	// along each axis; t in [0, 0.5].
	Translate float64 `json:"translate,omitempty"`
	// Cutout n blanks n rectangles, each side uniform in [1/8, 1/4] of the
	// crop's; n in [0, 16].
	Cutout int `json:"cutout,omitempty"`
}

// Enabled reports whether any geometric change is on.
func (g Geometric) Enabled() bool {
	return g.Rotate > 0 || g.Shear > 0 || g.Translate > 0 || g.Cutout > 0
}

func (g Geometric) affine() bool { return g.Rotate > 0 || g.Shear > 0 || g.Translate > 0 }

func (g Geometric) validate() error {
	for _, f := range []struct {
		name   string
		v, max float64
	}{{"rotate", g.Rotate, 180}, {"shear", g.Shear, 45}, {"translate", g.Translate, 0.5}, {"cutout", float64(g.Cutout), 16}} {
		if !(f.v >= 0 && f.v <= f.max) {
			return fmt.Errorf("augment: %s %v must be within 0..%v", f.name, f.v, f.max)
		}
	}
	return nil
}

// symmetric draws uniformly from [−m, m]; nothing for m = 0.
func symmetric(r *rng, m float64) float64 {
	if m == 0 {
		return 0
	}
	return (2*r.float64() - 1) * m
}

// geometric applies the affine change and the cutouts to the rendered
// crop img and its mask, in place.
func (a *Augment) geometric(r *rng, img *image.RGBA, mask []int64, pad [3]uint8, ignore uint8, sc *augmentScratch) {
	g := a.Geometric
	if !g.Enabled() {
		return
	}
	w, h := a.Width, a.Height
	if g.affine() {
		rot := symmetric(r, g.Rotate) * math.Pi / 180
		shear := math.Tan(symmetric(r, g.Shear) * math.Pi / 180)
		tx, ty := symmetric(r, g.Translate)*float64(w), symmetric(r, g.Translate)*float64(h)
		a.warp(img, mask, rot, shear, tx, ty, pad, ignore, sc)
	}
	for range g.Cutout {
		cw := w/8 + r.intn(max(w/4-w/8, 0)+1)
		ch := h/8 + r.intn(max(h/4-h/8, 0)+1)
		x0, y0 := r.intn(w)-cw/2, r.intn(h)-ch/2
		for y := max(y0, 0); y < min(y0+ch, h); y++ {
			for x := max(x0, 0); x < min(x0+cw, w); x++ {
				px := img.Pix[y*img.Stride+4*x : y*img.Stride+4*x+4 : y*img.Stride+4*x+4]
				px[0], px[1], px[2], px[3] = pad[0], pad[1], pad[2], 0xff
				mask[y*w+x] = int64(ignore)
			}
		}
	}
}

// warp maps every output pixel p to the source c + A⁻¹(p − c − t), where
// A = rotation · horizontal shear about the crop's centre c, and samples
// the source there (bilinear image, nearest mask).
func (a *Augment) warp(img *image.RGBA, mask []int64, rot, shear, tx, ty float64, pad [3]uint8, ignore uint8, sc *augmentScratch) {
	w, h := a.Width, a.Height
	sc.srcPix = append(sc.srcPix[:0], img.Pix...)
	sc.srcMask = append(sc.srcMask[:0], mask...)
	src, srcMask, stride := sc.srcPix, sc.srcMask, img.Stride
	// A = R·S with R the rotation, S = [[1, k], [0, 1]]; A⁻¹ = S⁻¹·R⁻¹.
	cos, sin := math.Cos(rot), math.Sin(rot)
	cx, cy := float64(w)/2, float64(h)/2
	for y := range h {
		for x := range w {
			// Pixel centres; d = p − c − t.
			dx, dy := float64(x)+0.5-cx-tx, float64(y)+0.5-cy-ty
			ux, uy := cos*dx+sin*dy, -sin*dx+cos*dy // R⁻¹ d
			sx, sy := ux-shear*uy+cx-0.5, uy+cy-0.5 // S⁻¹, back to indices
			o := y*stride + 4*x
			px := img.Pix[o : o+4 : o+4]
			nx, ny := int(math.Floor(sx+0.5)), int(math.Floor(sy+0.5))
			if sx < -0.5 || sy < -0.5 || sx >= float64(w)-0.5 || sy >= float64(h)-0.5 || nx >= w || ny >= h {
				px[0], px[1], px[2], px[3] = pad[0], pad[1], pad[2], 0xff
				mask[y*w+x] = int64(ignore)
				continue
			}
			mask[y*w+x] = srcMask[ny*w+nx]
			x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
			fx, fy := sx-float64(x0), sy-float64(y0)
			x0c, x1c := min(max(x0, 0), w-1), min(max(x0+1, 0), w-1)
			y0c, y1c := min(max(y0, 0), h-1), min(max(y0+1, 0), h-1)
			for k := range 3 {
				p00 := float64(src[y0c*stride+4*x0c+k])
				p01 := float64(src[y0c*stride+4*x1c+k])
				p10 := float64(src[y1c*stride+4*x0c+k])
				p11 := float64(src[y1c*stride+4*x1c+k])
				v := (p00*(1-fx)+p01*fx)*(1-fy) + (p10*(1-fx)+p11*fx)*fy
				px[k] = uint8(min(max(math.Round(v), 0), 255))
			}
			px[3] = 0xff
		}
	}
}
