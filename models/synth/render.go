package synth

import (
	"image"
	"math"
	"math/rand/v2"
)

// canvas is an image under construction: interleaved RGB in 0..255 floats,
// the labels, and which shape owns each pixel (-1: none).
type canvas struct {
	w, h   int
	pix    []float32
	labels []uint8
	owner  []int16
}

func newCanvas(w, h int) *canvas {
	cv := &canvas{w: w, h: h, pix: make([]float32, 3*w*h), labels: make([]uint8, w*h), owner: make([]int16, w*h)}
	for i := range cv.owner {
		cv.owner[i] = -1
	}
	return cv
}

// rgb is a colour with channels in 0..255.
type rgb [3]float64

// hsv converts hue (degrees), saturation and value (0..1) to rgb.
func hsv(h, s, v float64) rgb {
	h = math.Mod(h, 360)
	if h < 0 {
		h += 360
	}
	s = min(max(s, 0), 1)
	v = min(max(v, 0), 1)
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := v - c
	var r, g, b float64
	switch {
	case h < 60:
		r, g, b = c, x, 0
	case h < 120:
		r, g, b = x, c, 0
	case h < 180:
		r, g, b = 0, c, x
	case h < 240:
		r, g, b = 0, x, c
	case h < 300:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	return rgb{(r + m) * 255, (g + m) * 255, (b + m) * 255}
}

// hsvColor is a colour kept in HSV so it can be jittered.
type hsvColor struct{ h, s, v float64 }

func (c hsvColor) rgb() rgb { return hsv(c.h, c.s, c.v) }

func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// background paints a tinted, shaded and textured background and returns
// its base colour (for camouflaged objects).
func (cv *canvas) background(r *rand.Rand) hsvColor {
	base := hsvColor{uniform(r, 0, 360), uniform(r, 0.05, 0.5), uniform(r, 0.3, 0.8)}
	second := hsvColor{base.h + uniform(r, -40, 40), min(max(base.s+uniform(r, -0.15, 0.15), 0), 1), min(max(base.v+uniform(r, -0.25, 0.25), 0.1), 1)}
	c0, c1 := base.rgb(), second.rgb()
	phi := uniform(r, 0, 2*math.Pi)
	gx, gy := math.Cos(phi), math.Sin(phi)
	diag := math.Hypot(float64(cv.w), float64(cv.h))
	// Waves: one oriented sinusoid, tinted per channel.
	amp := uniform(r, 4, 20)
	freq := 2 * math.Pi * uniform(r, 0.02, 0.15)
	psi := uniform(r, 0, math.Pi)
	wx, wy := freq*math.Cos(psi), freq*math.Sin(psi)
	phase := uniform(r, 0, 2*math.Pi)
	var tint rgb
	for c := range tint {
		tint[c] = uniform(r, 0.7, 1.3)
	}
	// Blotches: coarse value noise, bilinearly interpolated.
	cell := uniform(r, 12, 24)
	gw, gh := int(float64(cv.w)/cell)+2, int(float64(cv.h)/cell)+2
	grid := make([]float64, 3*gw*gh)
	sigma := uniform(r, 6, 16)
	for i := range grid {
		grid[i] = r.NormFloat64() * sigma
	}
	// sin(wx·x + wy·y + phase), separated into per-column and per-row terms.
	sx, cx := make([]float64, cv.w), make([]float64, cv.w)
	for x := range sx {
		sx[x], cx[x] = math.Sincos(wx * float64(x))
	}
	for y := 0; y < cv.h; y++ {
		sy, cy := math.Sincos(wy*float64(y) + phase)
		fy := (float64(y) + 0.5) / cell
		y0 := int(fy)
		ty := fy - float64(y0)
		for x := 0; x < cv.w; x++ {
			fx := (float64(x) + 0.5) / cell
			x0 := int(fx)
			tx := fx - float64(x0)
			t := ((float64(x)-float64(cv.w)/2)*gx+(float64(y)-float64(cv.h)/2)*gy)/diag + 0.5
			wave := amp * (sx[x]*cy + cx[x]*sy)
			k := 3 * (y*cv.w + x)
			for c := 0; c < 3; c++ {
				g00, g01 := grid[3*(y0*gw+x0)+c], grid[3*(y0*gw+x0+1)+c]
				g10, g11 := grid[3*((y0+1)*gw+x0)+c], grid[3*((y0+1)*gw+x0+1)+c]
				blotch := (g00*(1-tx)+g01*tx)*(1-ty) + (g10*(1-tx)+g11*tx)*ty
				cv.pix[k+c] = float32(c0[c]*(1-t) + c1[c]*t + wave*tint[c] + blotch)
			}
		}
	}
	return base
}

// Shape kinds: discs and squares are objects; ellipses, triangles and
// rings are background distractors.
const (
	kindDisc = iota
	kindSquare
	kindEllipse
	kindTriangle
	kindRing
)

// shape is one shape to paint.
type shape struct {
	kind          int
	object, camo  bool
	class         int
	x, y          float64 // centre
	size, angle   float64 // radius (disc, ellipse's long semi-axis, ring, triangle's inradius) or side (square)
	aspect, width float64 // ellipse aspect ratio; ring width
	fraction      float64
	col           rgb
	// Shading (a linear ramp across the shape) and stripes texture.
	shadeX, shadeY  float64
	stripeX, stripe float64
	stripeY, phase  float64
	cos, sin        float64
}

// sdf is an approximate signed distance from pixel point (px, py) to the
// shape's outline, positive inside, in pixels.
func (s *shape) sdf(px, py float64) float64 {
	dx, dy := px-s.x, py-s.y
	u, v := dx*s.cos+dy*s.sin, -dx*s.sin+dy*s.cos
	switch s.kind {
	case kindDisc:
		return s.size - math.Hypot(dx, dy)
	case kindSquare:
		return s.size/2 - max(math.Abs(u), math.Abs(v))
	case kindEllipse:
		b := s.size / s.aspect
		return (1 - math.Hypot(u/s.size, v/b)) * b
	case kindTriangle:
		// Inradius minus the largest projection on the three edge normals.
		m := u
		for _, a := range [2]float64{2 * math.Pi / 3, 4 * math.Pi / 3} {
			m = max(m, u*math.Cos(a)+v*math.Sin(a))
		}
		return s.size - m
	default: // ring
		return s.width/2 - math.Abs(math.Hypot(dx, dy)-(s.size-s.width/2))
	}
}

// extent bounds the shape's distance from its centre.
func (s *shape) extent() float64 {
	switch s.kind {
	case kindSquare:
		return s.size * math.Sqrt2 / 2
	case kindTriangle:
		return 2 * s.size
	}
	return s.size
}

// logUniform draws from [lo, hi] log-uniformly.
func logUniform(r *rand.Rand, lo, hi float64) float64 {
	return math.Exp(uniform(r, math.Log(lo), math.Log(hi)))
}

// drawShapes places the objects and distractors, paints them in a random
// order (later ones occlude earlier ones) and returns them in that order.
func drawShapes(c Config, r *rand.Rand, cv *canvas, bg hsvColor) []shape {
	area := float64(cv.w * cv.h)
	n := 1 + r.IntN(c.MaxObjects)
	nd := 0
	if c.Distractors > 0 {
		nd = r.IntN(c.Distractors + 1)
	}
	shapes := make([]shape, 0, n+nd)
	for i := 0; i < n+nd; i++ {
		s := shape{object: i < n}
		if s.object {
			s.class = Disc + r.IntN(2)
			s.kind = kindDisc
			if s.class == Square {
				s.kind = kindSquare
			}
			s.fraction = logUniform(r, c.MinFraction, c.MaxFraction)
			a := s.fraction * area
			if s.kind == kindDisc {
				s.size = math.Sqrt(a / math.Pi)
			} else {
				s.size = math.Sqrt(a)
				s.angle = uniform(r, 0, math.Pi/2)
			}
			hue := 15.0
			if s.class == Square {
				hue = 215
			}
			col := hsvColor{hue + 18*r.NormFloat64(), uniform(r, 0.4, 0.9), uniform(r, 0.45, 0.95)}
			if r.Float64() < c.Camouflage {
				s.camo = true
				col = hsvColor{bg.h + uniform(r, -25, 25), bg.s + uniform(r, -0.1, 0.1), bg.v + uniform(r, -0.12, 0.12)}
			}
			s.col = col.rgb()
		} else {
			s.kind = kindEllipse + r.IntN(3)
			s.fraction = logUniform(r, min(4*c.MinFraction, c.MaxFraction), max(c.MaxFraction/2, c.MinFraction))
			a := s.fraction * area
			s.angle = uniform(r, 0, 2*math.Pi)
			switch s.kind {
			case kindEllipse:
				s.aspect = uniform(r, 2.5, 4)
				s.size = math.Sqrt(a * s.aspect / math.Pi)
			case kindTriangle:
				s.size = math.Sqrt(a / (3 * math.Sqrt(3)))
			case kindRing:
				s.size = 1.3 * math.Sqrt(a/math.Pi)
				s.width = max(1.5, s.size*uniform(r, 0.2, 0.4))
			}
			s.col = hsv(uniform(r, 0, 360), uniform(r, 0.2, 0.9), uniform(r, 0.3, 0.95))
		}
		s.x = uniform(r, 0.05, 0.95) * float64(cv.w)
		s.y = uniform(r, 0.05, 0.95) * float64(cv.h)
		s.cos, s.sin = math.Cos(s.angle), math.Sin(s.angle)
		shade, dir := uniform(r, 0, 0.25), uniform(r, 0, 2*math.Pi)
		s.shadeX, s.shadeY = shade*math.Cos(dir), shade*math.Sin(dir)
		f, o := 2*math.Pi*uniform(r, 0.15, 0.35), uniform(r, 0, math.Pi)
		s.stripeX, s.stripeY, s.stripe, s.phase = f*math.Cos(o), f*math.Sin(o), uniform(r, 0, 10), uniform(r, 0, 2*math.Pi)
		shapes = append(shapes, s)
	}
	r.Shuffle(len(shapes), func(i, j int) { shapes[i], shapes[j] = shapes[j], shapes[i] })
	for i := range shapes {
		cv.paint(&shapes[i], int16(i))
	}
	return shapes
}

// paint draws s with anti-aliased edges (coverage from the signed
// distance); the pixels whose centres lie inside get its label and owner.
func (cv *canvas) paint(s *shape, id int16) {
	e := s.extent() + 1
	x0, x1 := max(int(math.Floor(s.x-e)), 0), min(int(math.Ceil(s.x+e)), cv.w-1)
	y0, y1 := max(int(math.Floor(s.y-e)), 0), min(int(math.Ceil(s.y+e)), cv.h-1)
	label := uint8(Background)
	if s.object {
		label = uint8(s.class)
	}
	inv := 1 / max(s.extent(), 1)
	for y := y0; y <= y1; y++ {
		py := float64(y) + 0.5
		for x := x0; x <= x1; x++ {
			px := float64(x) + 0.5
			d := s.sdf(px, py)
			alpha := min(max(d+0.5, 0), 1)
			if alpha == 0 {
				continue
			}
			shade := 1 + ((px-s.x)*s.shadeX+(py-s.y)*s.shadeY)*inv
			tex := s.stripe * math.Sin(s.stripeX*px+s.stripeY*py+s.phase)
			k := 3 * (y*cv.w + x)
			for c := 0; c < 3; c++ {
				v := s.col[c]*shade + tex
				cv.pix[k+c] = float32(float64(cv.pix[k+c])*(1-alpha) + v*alpha)
			}
			if d > 0 {
				cv.labels[y*cv.w+x] = label
				cv.owner[y*cv.w+x] = id
			}
		}
	}
}

// owned counts the pixels shape id ended up owning.
func (cv *canvas) owned(id int) int {
	n := 0
	for _, o := range cv.owner {
		if int(o) == id {
			n++
		}
	}
	return n
}

// finish applies a global colour jitter (contrast, brightness, per-channel
// gain) and Gaussian pixel noise of standard deviation noise (none if < 0).
func (cv *canvas) finish(r *rand.Rand, noise float64) {
	contrast := uniform(r, 0.85, 1.15)
	bright := uniform(r, -15, 15)
	var gain [3]float64
	for c := range gain {
		gain[c] = uniform(r, 0.9, 1.1)
	}
	for i := range cv.pix {
		v := ((float64(cv.pix[i])-128)*contrast + 128 + bright) * gain[i%3]
		if noise > 0 {
			v += r.NormFloat64() * noise
		}
		cv.pix[i] = float32(v)
	}
}

// rgba quantises the canvas to an opaque RGBA image.
func (cv *canvas) rgba() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, cv.w, cv.h))
	for i := 0; i < cv.w*cv.h; i++ {
		for c := 0; c < 3; c++ {
			img.Pix[4*i+c] = uint8(min(max(cv.pix[3*i+c]+0.5, 0), 255))
		}
		img.Pix[4*i+3] = 255
	}
	return img
}
