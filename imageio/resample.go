package imageio

import (
	"image"
	"math"
)

// scratch holds per-worker buffers: a conversion target for non-RGBA
// images, sampling tables for the last size seen and two cached rows of
// horizontally resampled, normalised values.
type scratch struct {
	rgba *image.RGBA

	key      [5]int // srcW, srcH, dstW, dstH, bilinear
	xoff0    []int  // byte offset of the left tap in a source row
	xoff1    []int  // byte offset of the right tap
	xw       []float32
	yrow0    []int // index of the upper source row
	yrow1    []int
	yw       []float32
	cache    [2][]float32 // horizontally resampled rows, RGB interleaved
	cacheRow [2]int
}

// byteFloat converts bytes to float32 by table: an L1 load is cheaper than
// the int-to-float instruction, whose false register dependency serialises
// the hot loop.
var byteFloat = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

// linearTaps fills half-pixel-centre bilinear taps mapping dst samples onto
// src samples; off scales indices (4 for byte offsets in RGBA rows).
func linearTaps(src, dst, off int, i0, i1 []int, w []float32) {
	scale := float64(src) / float64(dst)
	for o := 0; o < dst; o++ {
		s := max((float64(o)+0.5)*scale-0.5, 0)
		k := int(s)
		f := s - float64(k)
		if k >= src-1 {
			k, f = src-1, 0
		}
		i0[o] = k * off
		i1[o] = min(k+1, src-1) * off
		w[o] = float32(f)
	}
}

// nearestTaps maps each dst sample to the src sample whose area holds its
// centre.
func nearestTaps(src, dst, off int, i0 []int) {
	scale := float64(src) / float64(dst)
	for o := 0; o < dst; o++ {
		k := min(int(math.Floor((float64(o)+0.5)*scale)), src-1)
		i0[o] = k * off
	}
}

func (s *scratch) tables(srcW, srcH, dstW, dstH int, bilinear bool) {
	key := [5]int{srcW, srcH, dstW, dstH, 0}
	if bilinear {
		key[4] = 1
	}
	if key == s.key && s.xoff0 != nil {
		return
	}
	s.key = key
	s.xoff0 = resize(s.xoff0, dstW)
	s.xoff1 = resize(s.xoff1, dstW)
	s.xw = resize(s.xw, dstW)
	s.yrow0 = resize(s.yrow0, dstH)
	s.yrow1 = resize(s.yrow1, dstH)
	s.yw = resize(s.yw, dstH)
	if bilinear {
		linearTaps(srcW, dstW, 4, s.xoff0, s.xoff1, s.xw)
		linearTaps(srcH, dstH, 1, s.yrow0, s.yrow1, s.yw)
	} else {
		nearestTaps(srcW, dstW, 4, s.xoff0)
		nearestTaps(srcH, dstH, 1, s.yrow0)
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// run fills dst: padding outside g.Content, resampled image inside.
func (s *scratch) run(pl *plan, p *Preprocess, g Geometry, src rgbaView, dst []float32) {
	wr := writer{dst: dst, w: g.Width, plane: g.Width * g.Height, nhwc: pl.nhwc, slot: pl.slot}
	c := g.Content
	if c != image.Rect(0, 0, g.Width, g.Height) {
		var pad [3]float32
		for ch := range pad {
			pad[ch] = float32(p.PadColor[ch])*pl.mul[ch] + pl.add[ch]
		}
		for y := 0; y < g.Height; y++ {
			if y < c.Min.Y || y >= c.Max.Y {
				wr.fill(y, 0, g.Width, pad)
				continue
			}
			wr.fill(y, 0, c.Min.X, pad)
			wr.fill(y, c.Max.X, g.Width-c.Max.X, pad)
		}
	}
	cw, ch := c.Dx(), c.Dy()
	// Same size: bilinear with half-pixel centres is the identity, so take
	// the cheaper nearest path.
	bilinear := pl.bilinear && (cw != src.w || ch != src.h)
	s.tables(src.w, src.h, cw, ch, bilinear)
	if bilinear {
		s.bilinear(pl, &wr, c, src)
	} else {
		s.nearest(pl, &wr, c, src)
	}
}

func (s *scratch) nearest(pl *plan, wr *writer, c image.Rectangle, src rgbaView) {
	// A byte can take only 256 values: look normalised values up.
	var lut [3][256]float32
	for ch := range lut {
		for v := range lut[ch] {
			lut[ch][v] = float32(v)*pl.mul[ch] + pl.add[ch]
		}
	}
	lr, lg, lb := &lut[0], &lut[1], &lut[2]
	xoff := s.xoff0[:c.Dx()]
	for oy := 0; oy < c.Dy(); oy++ {
		sy := s.yrow0[oy]
		row := src.pix[sy*src.stride : sy*src.stride+4*src.w]
		r, g, b := wr.rows(c.Min.Y+oy, c.Min.X, c.Dx())
		if wr.nhwc {
			o0, o1, o2 := wr.slot[0], wr.slot[1], wr.slot[2]
			for ox, xo := range xoff {
				px := row[xo : xo+3 : xo+3]
				out := r[3*ox : 3*ox+3 : 3*ox+3]
				out[o0] = lr[px[0]]
				out[o1] = lg[px[1]]
				out[o2] = lb[px[2]]
			}
			continue
		}
		g, b = g[:len(r)], b[:len(r)]
		for ox, xo := range xoff[:len(r)] {
			px := row[xo : xo+3 : xo+3]
			r[ox] = lr[px[0]]
			g[ox] = lg[px[1]]
			b[ox] = lb[px[2]]
		}
	}
}

// hrow returns source row sy resampled horizontally and normalised, using
// the two-row cache; keep is a row that must not be evicted.
func (s *scratch) hrow(pl *plan, src rgbaView, sy, keep, n int) []float32 {
	for i := range s.cache {
		if s.cacheRow[i] == sy && len(s.cache[i]) == 3*n {
			return s.cache[i]
		}
	}
	slot := 0
	if s.cacheRow[0] == keep && len(s.cache[0]) == 3*n {
		slot = 1
	}
	buf := resize(s.cache[slot], 3*n)
	s.cache[slot], s.cacheRow[slot] = buf, sy
	row := src.pix[sy*src.stride : sy*src.stride+4*src.w]
	m0, m1, m2 := pl.mul[0], pl.mul[1], pl.mul[2]
	a0, a1, a2 := pl.add[0], pl.add[1], pl.add[2]
	x0, x1, xw := s.xoff0[:n], s.xoff1[:n], s.xw[:n]
	for ox := range x0 {
		p := row[x0[ox] : x0[ox]+3 : x0[ox]+3]
		q := row[x1[ox] : x1[ox]+3 : x1[ox]+3]
		w := xw[ox]
		r0, g0, b0 := byteFloat[p[0]], byteFloat[p[1]], byteFloat[p[2]]
		out := buf[3*ox : 3*ox+3 : 3*ox+3]
		// Normalisation is affine, so applying it before the vertical
		// blend gives the same result with fewer operations.
		out[0] = (r0+(byteFloat[q[0]]-r0)*w)*m0 + a0
		out[1] = (g0+(byteFloat[q[1]]-g0)*w)*m1 + a1
		out[2] = (b0+(byteFloat[q[2]]-b0)*w)*m2 + a2
	}
	return buf
}

func (s *scratch) bilinear(pl *plan, wr *writer, c image.Rectangle, src rgbaView) {
	n := c.Dx()
	s.cacheRow = [2]int{-1, -1}
	for oy := 0; oy < c.Dy(); oy++ {
		sy0, sy1, wy := s.yrow0[oy], s.yrow1[oy], s.yw[oy]
		a := s.hrow(pl, src, sy0, sy1, n)
		bb := a
		if wy != 0 && sy1 != sy0 {
			bb = s.hrow(pl, src, sy1, sy0, n)
		} else {
			wy = 0
		}
		r, g, b := wr.rows(c.Min.Y+oy, c.Min.X, n)
		if wr.nhwc {
			o0, o1, o2 := wr.slot[0], wr.slot[1], wr.slot[2]
			bb = bb[:len(a)]
			for i := 0; i+2 < len(a); i += 3 {
				out := r[i : i+3 : i+3]
				out[o0] = a[i] + (bb[i]-a[i])*wy
				out[o1] = a[i+1] + (bb[i+1]-a[i+1])*wy
				out[o2] = a[i+2] + (bb[i+2]-a[i+2])*wy
			}
			continue
		}
		g, b = g[:len(r)], b[:len(r)]
		a, bb = a[:3*len(r)], bb[:3*len(r)]
		for ox := range r {
			i := 3 * ox
			av := a[i : i+3 : i+3]
			bv := bb[i : i+3 : i+3]
			r[ox] = av[0] + (bv[0]-av[0])*wy
			g[ox] = av[1] + (bv[1]-av[1])*wy
			b[ox] = av[2] + (bv[2]-av[2])*wy
		}
	}
}
