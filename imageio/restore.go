package imageio

import (
	"fmt"
	"image"
)

// Label is the element type of a label map.
type Label interface{ ~uint8 | ~int32 }

// Argmax writes, for every pixel of [classes, h, w] logits (NCHW without the
// batch dimension), the index of its largest value into dst (h·w labels).
// Ties go to the lower class; NaN never wins.
func Argmax(logits []float32, classes, h, w int, dst []uint8) error {
	if err := checkLogits(len(logits), classes, h, w); err != nil {
		return err
	}
	n := h * w
	if len(dst) < n {
		return fmt.Errorf("argmax: label buffer holds %d, need %d", len(dst), n)
	}
	dst = dst[:n]
	best := make([]float32, n)
	copy(best, logits[:n])
	clear(dst)
	for c := 1; c < classes; c++ {
		plane := logits[c*n : (c+1)*n]
		for i, v := range plane {
			if v > best[i] || (best[i] != best[i] && v == v) {
				best[i], dst[i] = v, uint8(c)
			}
		}
	}
	return nil
}

func checkLogits(n, classes, h, w int) error {
	if classes < 1 || classes > 256 {
		return fmt.Errorf("logits: %d classes, want 1..256 for byte labels", classes)
	}
	if h <= 0 || w <= 0 || n != classes*h*w {
		return fmt.Errorf("logits: %d values are not [%d,%d,%d]", n, classes, h, w)
	}
	return nil
}

// ResizeLabels resizes a sw×sh label map to dw×dh with nearest neighbour
// (labels must never be blended).
func ResizeLabels[T Label](src []T, sw, sh int, dst []T, dw, dh int) error {
	if sw <= 0 || sh <= 0 || len(src) != sw*sh {
		return fmt.Errorf("resize labels: %d labels are not %dx%d (WxH)", len(src), sw, sh)
	}
	return resizeLabelsRect(src, sw, image.Rect(0, 0, sw, sh), dst, dw, dh)
}

// resizeLabelsRect resamples the crop r of a label map of width sw into
// dst (dw×dh).
func resizeLabelsRect[T Label](src []T, sw int, r image.Rectangle, dst []T, dw, dh int) error {
	if dw <= 0 || dh <= 0 || len(dst) < dw*dh {
		return fmt.Errorf("resize labels: buffer of %d labels cannot hold %dx%d (WxH)", len(dst), dw, dh)
	}
	xs := make([]int, dw)
	nearestTaps(r.Dx(), dw, 1, xs)
	ys := make([]int, dh)
	nearestTaps(r.Dy(), dh, 1, ys)
	for y, sy := range ys {
		srow := src[(r.Min.Y+sy)*sw+r.Min.X : (r.Min.Y+sy)*sw+r.Max.X]
		drow := dst[y*dw : (y+1)*dw]
		for x, sx := range xs {
			drow[x] = srow[sx]
		}
	}
	return nil
}

// RestoreLabels maps a label map of the tensor's size (Width×Height) back
// onto the original image (SrcWidth×SrcHeight), dropping letterbox borders;
// nearest neighbour.
func RestoreLabels[T Label](g Geometry, labels []T, dst []T) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("restore labels: %w", err)
	}
	if len(labels) != g.Width*g.Height || g.Content.Empty() {
		return fmt.Errorf("restore labels: %d labels do not match the %dx%d (WxH) tensor", len(labels), g.Width, g.Height)
	}
	return resizeLabelsRect(labels, g.Width, g.Content, dst, g.SrcWidth, g.SrcHeight)
}

// ProjectLabels maps a label map of the original image's size into the
// tensor's geometry, the way Tensor maps the image (nearest neighbour),
// filling letterbox borders with pad (typically the ignore label). Use it
// to bring training masks to the model input size.
func ProjectLabels[T Label](g Geometry, labels []T, dst []T, pad T) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("project labels: %w", err)
	}
	if len(labels) != g.SrcWidth*g.SrcHeight || g.SrcWidth <= 0 {
		return fmt.Errorf("project labels: %d labels do not match the %dx%d (WxH) image", len(labels), g.SrcWidth, g.SrcHeight)
	}
	if len(dst) < g.Width*g.Height {
		return fmt.Errorf("project labels: buffer of %d labels cannot hold %dx%d (WxH)", len(dst), g.Width, g.Height)
	}
	c := g.Content
	xs := make([]int, c.Dx())
	nearestTaps(g.SrcWidth, c.Dx(), 1, xs)
	ys := make([]int, c.Dy())
	nearestTaps(g.SrcHeight, c.Dy(), 1, ys)
	for y := 0; y < g.Height; y++ {
		drow := dst[y*g.Width : (y+1)*g.Width]
		if y < c.Min.Y || y >= c.Max.Y {
			for x := range drow {
				drow[x] = pad
			}
			continue
		}
		srow := labels[ys[y-c.Min.Y]*g.SrcWidth : (ys[y-c.Min.Y]+1)*g.SrcWidth]
		for x := range drow {
			if x < c.Min.X || x >= c.Max.X {
				drow[x] = pad
				continue
			}
			drow[x] = srow[xs[x-c.Min.X]]
		}
	}
	return nil
}

// RestoreLogits maps [classes, Height, Width] logits back onto the original
// image: the Content region is upsampled bilinearly (half-pixel centres) to
// SrcWidth×SrcHeight and the arg-max class of each pixel written to dst.
// Interpolating logits before the arg-max gives smoother boundaries than
// resizing the label map.
func (g Geometry) RestoreLogits(logits []float32, classes int, dst []uint8) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("restore logits: %w", err)
	}
	if err := checkLogits(len(logits), classes, g.Height, g.Width); err != nil {
		return fmt.Errorf("restore logits: %w", err)
	}
	dw, dh := g.SrcWidth, g.SrcHeight
	if dw <= 0 || dh <= 0 || len(dst) < dw*dh {
		return fmt.Errorf("restore logits: buffer of %d labels cannot hold %dx%d (WxH)", len(dst), dw, dh)
	}
	if g.identity() && argmaxFinite(logits, classes, dw, dh, dst) {
		return nil
	}
	g.restoreBilinear(logits, classes, dst)
	return nil
}

// restoreBilinear is RestoreLogits after its checks.
func (g Geometry) restoreBilinear(logits []float32, classes int, dst []uint8) {
	dw, dh := g.SrcWidth, g.SrcHeight
	t := newLogitTaps(g, dw, dh)
	best := make([]float32, dw)
	plane := g.Width * g.Height
	for y := 0; y < dh; y++ {
		out := dst[y*dw : (y+1)*dw]
		for c := 0; c < classes; c++ {
			p := logits[c*plane : (c+1)*plane]
			r0 := p[t.y0[y] : t.y0[y]+g.Width]
			r1 := p[t.y1[y] : t.y1[y]+g.Width]
			wy := t.wy[y]
			for x := range out {
				a := r0[t.x0[x]] + (r0[t.x1[x]]-r0[t.x0[x]])*t.wx[x]
				b := r1[t.x0[x]] + (r1[t.x1[x]]-r1[t.x0[x]])*t.wx[x]
				v := a + (b-a)*wy
				if c == 0 || v > best[x] || (best[x] != best[x] && v == v) {
					best[x], out[x] = v, uint8(c)
				}
			}
		}
	}
}

// identity reports whether the tensor is the image itself (no resize, no
// borders): the bilinear taps then all have weight 0.
func (g Geometry) identity() bool {
	return g.Width == g.SrcWidth && g.Height == g.SrcHeight && g.Content == image.Rect(0, 0, g.Width, g.Height)
}

// argmaxFinite is RestoreLogits for an identity geometry, without the
// interpolation: with weight-0 taps a + (b−a)·0 is a exactly when every
// logit is finite (an infinite or NaN neighbour would turn the product
// into NaN), so it first checks that and returns false, writing nothing,
// otherwise. Same tie rule (the lower class) and so the same labels.
func argmaxFinite(logits []float32, classes, w, h int, dst []uint8) bool {
	for _, v := range logits {
		if v-v != 0 { // NaN or ±Inf
			return false
		}
	}
	n := w * h
	out := dst[:n]
	clear(out)
	if classes == 2 { // the common binary case, one pass
		for i, v := range logits[n : 2*n] {
			if v > logits[i] {
				out[i] = 1
			}
		}
		return true
	}
	var best [256]float32
	for y := 0; y < h; y++ {
		for x0 := 0; x0 < w; x0 += len(best) {
			m := min(len(best), w-x0)
			i0 := y*w + x0
			copy(best[:m], logits[i0:i0+m])
			for c := 1; c < classes; c++ {
				row := logits[c*n+i0 : c*n+i0+m]
				for x, v := range row {
					if v > best[x] {
						best[x], out[i0+x] = v, uint8(c)
					}
				}
			}
		}
	}
	return true
}

// RestoreScores is RestoreLogits without the arg-max: it writes the
// upsampled [classes, SrcHeight, SrcWidth] values (e.g. probabilities) into
// dst.
func (g Geometry) RestoreScores(logits []float32, classes int, dst []float32) error {
	if err := g.check(); err != nil {
		return fmt.Errorf("restore scores: %w", err)
	}
	if err := checkLogits(len(logits), classes, g.Height, g.Width); err != nil {
		return fmt.Errorf("restore scores: %w", err)
	}
	dw, dh := g.SrcWidth, g.SrcHeight
	if dw <= 0 || dh <= 0 || len(dst) < classes*dw*dh {
		return fmt.Errorf("restore scores: buffer of %d values cannot hold [%d,%d,%d]", len(dst), classes, dh, dw)
	}
	t := newLogitTaps(g, dw, dh)
	plane := g.Width * g.Height
	for c := 0; c < classes; c++ {
		p := logits[c*plane : (c+1)*plane]
		for y := 0; y < dh; y++ {
			r0 := p[t.y0[y] : t.y0[y]+g.Width]
			r1 := p[t.y1[y] : t.y1[y]+g.Width]
			wy := t.wy[y]
			out := dst[(c*dh+y)*dw : (c*dh+y+1)*dw]
			for x := range out {
				a := r0[t.x0[x]] + (r0[t.x1[x]]-r0[t.x0[x]])*t.wx[x]
				b := r1[t.x0[x]] + (r1[t.x1[x]]-r1[t.x0[x]])*t.wx[x]
				out[x] = a + (b-a)*wy
			}
		}
	}
	return nil
}

// logitTaps are bilinear taps from the original image's pixels into the
// Content region of the tensor: x0/x1 are column indices in a tensor row,
// y0/y1 offsets of tensor rows in a plane.
type logitTaps struct {
	x0, x1, y0, y1 []int
	wx, wy         []float32
}

func newLogitTaps(g Geometry, dw, dh int) logitTaps {
	t := logitTaps{
		x0: make([]int, dw), x1: make([]int, dw), wx: make([]float32, dw),
		y0: make([]int, dh), y1: make([]int, dh), wy: make([]float32, dh),
	}
	c := g.Content
	linearTaps(c.Dx(), dw, 1, t.x0, t.x1, t.wx)
	linearTaps(c.Dy(), dh, 1, t.y0, t.y1, t.wy)
	for i := range t.x0 {
		t.x0[i] += c.Min.X
		t.x1[i] += c.Min.X
	}
	for i := range t.y0 {
		t.y0[i] = (t.y0[i] + c.Min.Y) * g.Width
		t.y1[i] = (t.y1[i] + c.Min.Y) * g.Width
	}
	return t
}

// check rejects geometries that could not come from Preprocess.Geometry, so
// hand-built values fail with an error instead of an out-of-range panic.
func (g Geometry) check() error {
	full := image.Rect(0, 0, g.Width, g.Height)
	if g.SrcWidth <= 0 || g.SrcHeight <= 0 || g.Width <= 0 || g.Height <= 0 ||
		g.Content.Empty() || !g.Content.In(full) {
		return fmt.Errorf("invalid geometry: image %dx%d, tensor %dx%d, content %v",
			g.SrcWidth, g.SrcHeight, g.Width, g.Height, g.Content)
	}
	return nil
}
