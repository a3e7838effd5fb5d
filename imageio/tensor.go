package imageio

import (
	"fmt"
	"image"
	"sync"
)

// scratchPool recycles conversion buffers and resampling tables between
// calls; in a pipeline every image usually has the same size, so tables are
// built once per worker.
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// Tensor converts img into dst as one tensor slot (C=3, layout and size per
// p) and returns the geometry used. dst must hold at least Geometry.Len()
// values; only dst[:Len()] is written, so a batch buffer can be filled slot
// by slot without allocation.
func (p *Preprocess) Tensor(img image.Image, dst []float32) (Geometry, error) {
	pl, err := p.plan()
	if err != nil {
		return Geometry{}, err
	}
	b := img.Bounds()
	g, err := pl.geometry(p, b.Dx(), b.Dy())
	if err != nil {
		return g, err
	}
	if len(dst) < g.Len() {
		return g, fmt.Errorf("preprocess: tensor buffer holds %d values, need %d for %dx%dx%d",
			len(dst), g.Len(), Channels, g.Height, g.Width)
	}
	dst = dst[:g.Len()]
	s := scratchPool.Get().(*scratch)
	defer scratchPool.Put(s)
	var src rgbaView
	src, s.rgba = viewRGBA(img, s.rgba)
	s.run(&pl, p, g, src, dst)
	return g, nil
}

// NewTensor is Tensor with a freshly allocated buffer.
func (p *Preprocess) NewTensor(img image.Image) ([]float32, Geometry, error) {
	b := img.Bounds()
	g, err := p.Geometry(b.Dx(), b.Dy())
	if err != nil {
		return nil, g, err
	}
	dst := make([]float32, g.Len())
	g, err = p.Tensor(img, dst)
	if err != nil {
		return nil, g, err
	}
	return dst, g, nil
}

// writer scatters normalised RGB rows into the tensor's layout.
type writer struct {
	dst      []float32
	w, plane int
	nhwc     bool
	slot     [3]int
}

// row returns, for tensor row y starting at column x0 and n pixels wide, the
// three per-source-channel output slices (NCHW) or the interleaved slice
// (NHWC, in out[0]).
func (wr *writer) rows(y, x0, n int) (r, g, b []float32) {
	if wr.nhwc {
		i := (y*wr.w + x0) * Channels
		return wr.dst[i : i+n*Channels], nil, nil
	}
	i := y*wr.w + x0
	r = wr.dst[wr.slot[0]*wr.plane+i : wr.slot[0]*wr.plane+i+n]
	g = wr.dst[wr.slot[1]*wr.plane+i : wr.slot[1]*wr.plane+i+n]
	b = wr.dst[wr.slot[2]*wr.plane+i : wr.slot[2]*wr.plane+i+n]
	return r, g, b
}

// fill writes the constant normalised colour v (source channel order) to n
// pixels of tensor row y from column x0.
func (wr *writer) fill(y, x0, n int, v [3]float32) {
	if n <= 0 {
		return
	}
	r, g, b := wr.rows(y, x0, n)
	if wr.nhwc {
		var px [3]float32
		for c := range v {
			px[wr.slot[c]] = v[c]
		}
		for i := 0; i < len(r); i += 3 {
			r[i], r[i+1], r[i+2] = px[0], px[1], px[2]
		}
		return
	}
	for i := range r {
		r[i] = v[0]
	}
	for i := range g {
		g[i] = v[1]
	}
	for i := range b {
		b[i] = v[2]
	}
}
