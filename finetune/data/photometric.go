package data

import (
	"fmt"
	"image"
	"math"

	"github.com/disintegration/imaging"
)

// Photometric configures colour and blur augmentation of training crops,
// the photometric distortions of mmseg and albumentations, done with
// github.com/disintegration/imaging. Each field set above 0 applies its
// change to every crop with a magnitude drawn uniformly per example, in
// this order: brightness, contrast, saturation, gamma, blur. Masks are
// untouched. The draws follow the geometric ones in the example's own
// random stream, so with every field 0 (the default) nothing is drawn and
// runs are unchanged seed for seed.
//
// Cost per 360×480 crop (BenchmarkPhotometric, shared 2-core VM): 7.5 ms
// for the four colour changes, 11 ms for the blur, 16 ms for all five,
// against 1.8 ms for the rest of the augmentation (BenchmarkAugment). The
// loader's workers run it while the previous step trains.
type Photometric struct {
	// Brightness b shifts brightness by a percentage in [−100b, 100b]
	// (imaging.AdjustBrightness); b in [0, 1].
	Brightness float64 `json:"brightness,omitempty"`
	// Contrast c changes contrast by a percentage in [−100c, 100c]
	// (imaging.AdjustContrast); c in [0, 1].
	Contrast float64 `json:"contrast,omitempty"`
	// Saturation s changes saturation by a percentage in [−100s, 100s]
	// (imaging.AdjustSaturation); s in [0, 1].
	Saturation float64 `json:"saturation,omitempty"`
	// Gamma g applies a gamma drawn log-uniformly from [1/(1+g), 1+g]
	// (imaging.AdjustGamma: below 1 darkens, above 1 lightens); g in [0, 4].
	Gamma float64 `json:"gamma,omitempty"`
	// Blur σ applies a Gaussian blur of standard deviation uniform in
	// [0, σ] pixels (imaging.Blur); σ in [0, 20].
	Blur float64 `json:"blur,omitempty"`
}

// Enabled reports whether any photometric change is on.
func (p Photometric) Enabled() bool {
	return p.Brightness > 0 || p.Contrast > 0 || p.Saturation > 0 || p.Gamma > 0 || p.Blur > 0
}

func (p Photometric) validate() error {
	for _, f := range []struct {
		name   string
		v, max float64
	}{{"brightness", p.Brightness, 1}, {"contrast", p.Contrast, 1}, {"saturation", p.Saturation, 1}, {"gamma", p.Gamma, 4}, {"blur", p.Blur, 20}} {
		if !(f.v >= 0 && f.v <= f.max) {
			return fmt.Errorf("augment: %s %v must be within 0..%v", f.name, f.v, f.max)
		}
	}
	return nil
}

// photoDraw is one example's photometric choices.
type photoDraw struct {
	brightness, contrast, saturation float64 // percentages
	gamma, sigma                     float64 // 1 and 0 when off
}

// draw makes the choices, one uniform per enabled change, in field order.
func (p Photometric) draw(r *rng) photoDraw {
	d := photoDraw{gamma: 1}
	sym := func(x float64) float64 { return x * (2*r.float64() - 1) }
	if p.Brightness > 0 {
		d.brightness = 100 * sym(p.Brightness)
	}
	if p.Contrast > 0 {
		d.contrast = 100 * sym(p.Contrast)
	}
	if p.Saturation > 0 {
		d.saturation = 100 * sym(p.Saturation)
	}
	if p.Gamma > 0 {
		d.gamma = math.Exp(sym(math.Log1p(p.Gamma)))
	}
	if p.Blur > 0 {
		d.sigma = p.Blur * r.float64()
	}
	return d
}

// apply changes img (opaque RGBA) in place by d.
func (d photoDraw) apply(img *image.RGBA) {
	var out *image.NRGBA
	src := image.Image(img)
	step := func(n *image.NRGBA) { out, src = n, n }
	if d.brightness != 0 {
		step(imaging.AdjustBrightness(src, d.brightness))
	}
	if d.contrast != 0 {
		step(imaging.AdjustContrast(src, d.contrast))
	}
	if d.saturation != 0 {
		step(imaging.AdjustSaturation(src, d.saturation))
	}
	if d.gamma != 1 {
		step(imaging.AdjustGamma(src, d.gamma))
	}
	if d.sigma > 0 {
		step(imaging.Blur(src, d.sigma))
	}
	if out == nil {
		return
	}
	// Opaque NRGBA and RGBA share their byte layout: copy back row by row
	// so the tensor conversion keeps its RGBA fast path.
	w := 4 * img.Rect.Dx()
	for y := range img.Rect.Dy() {
		copy(img.Pix[y*img.Stride:y*img.Stride+w], out.Pix[y*out.Stride:y*out.Stride+w])
	}
}

// photometric applies a's photometric changes to the crop img, drawing from
// r after the geometric choices; nothing is drawn when none is enabled.
func (a *Augment) photometric(r *rng, img *image.RGBA) {
	if a.Photometric.Enabled() {
		a.Photometric.draw(r).apply(img)
	}
}
