package annot

import (
	"math"
	"slices"
)

// polyScale is the reference rasteriser's sub-pixel grid: polygon
// vertices are rounded to 1/5 pixel before the boundary is traced.
const polyScale = 5

// polygonRLE rasterises a polygon (x0,y0,x1,y1,… in pixel coordinates,
// closed implicitly) into column-major RLE counts for an h×w mask,
// exactly as pycocotools' rleFrPoly does. Pixel (x, y) covers
// [x, x+1)×[y, y+1), and the fill is even–odd at its centre: the outline,
// traced on a 1/5-pixel grid, toggles the mask where it crosses the line
// through a column's centres. Against the exact even–odd fill this
// differs only at centres within about 0.3 pixels of the outline. Unlike the reference, the traced
// boundary is not kept in memory: only the points where it enters a new
// column are, at most one per column crossed.
//
// The caller bounds the vertices (finite, near the image) and the
// perimeter, so the trace and the integers in it stay small.
func polygonRLE(xy []float64, h, w int) []uint32 {
	k := len(xy) / 2
	if k == 0 {
		return []uint32{uint32(h * w)}
	}
	// Float products are converted explicitly so that no fused
	// multiply-add rounds differently from the C code.
	vx := make([]int, k+1)
	vy := make([]int, k+1)
	for j := range k {
		vx[j] = int(float64(polyScale*xy[2*j]) + .5)
		vy[j] = int(float64(polyScale*xy[2*j+1]) + .5)
	}
	vx[k], vy[k] = vx[0], vy[0]

	var a []uint32
	first := true
	var pu, pv int
	visit := func(u, v int) {
		if first {
			first = false
			pu, pv = u, v
			return
		}
		if u != pu {
			xd := float64(u)
			if u >= pu {
				xd = float64(u - 1)
			}
			xd = (xd+.5)/polyScale - .5
			if math.Floor(xd) == xd && xd >= 0 && xd <= float64(w-1) {
				yd := float64(min(v, pv))
				yd = (yd+.5)/polyScale - .5
				if yd < 0 {
					yd = 0
				} else if yd > float64(h) {
					yd = float64(h)
				}
				yd = math.Ceil(yd)
				a = append(a, uint32(int(xd)*h+int(yd)))
			}
		}
		pu, pv = u, v
	}
	for j := range k {
		xs, xe, ys, ye := vx[j], vx[j+1], vy[j], vy[j+1]
		dx, dy := abs(xe-xs), abs(ys-ye)
		flip := (dx >= dy && xs > xe) || (dx < dy && ys > ye)
		if flip {
			xs, xe = xe, xs
			ys, ye = ye, ys
		}
		if dx >= dy {
			var s float64
			if dx > 0 {
				s = float64(ye-ys) / float64(dx)
			}
			for d := 0; d <= dx; d++ {
				t := d
				if flip {
					t = dx - d
				}
				visit(t+xs, int(float64(ys)+float64(s*float64(t))+.5))
			}
		} else {
			s := float64(xe-xs) / float64(dy)
			for d := 0; d <= dy; d++ {
				t := d
				if flip {
					t = dy - d
				}
				visit(int(float64(xs)+float64(s*float64(t))+.5), t+ys)
			}
		}
	}
	a = append(a, uint32(h*w))
	slices.Sort(a)
	var p uint32
	for j, t := range a {
		a[j] -= p
		p = t
	}
	// Merge empty runs: a zero count joins its neighbours.
	b := make([]uint32, 0, len(a))
	b = append(b, a[0])
	for j := 1; j < len(a); {
		if a[j] > 0 {
			b = append(b, a[j])
			j++
			continue
		}
		j++
		if j < len(a) {
			b[len(b)-1] += a[j]
			j++
		}
	}
	return b
}

// polygonPerimeter is the length of the closed polygon's outline in
// pixels, measured along x plus along y: more than the trace's steps.
func polygonPerimeter(xy []float64) float64 {
	k := len(xy) / 2
	per := 0.0
	for j := range k {
		n := (j + 1) % k
		per += math.Abs(xy[2*n]-xy[2*j]) + math.Abs(xy[2*n+1]-xy[2*j+1])
	}
	return per
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
