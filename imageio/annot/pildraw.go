package annot

import (
	"math"
	"slices"
)

// The fills of Pillow's ImageDraw (libImaging/Draw.c, as in Pillow 9),
// which LabelMe's shape_to_mask draws its shapes with: a polygon,
// rectangle or ellipse filled with outline = fill draws the fill alone.
// Pillow's rules differ from COCO's rasteriser (polygonRLE): vertices are
// truncated to whole pixels, each row's crossings are found on the row's
// pixel centres in float32, and the span between two crossings includes
// both ends once rounded (ROUND_UP the left, ROUND_DOWN the right). The
// arithmetic below keeps Pillow's float32 steps and its order of
// operations, so that masks match Pillow's pixel for pixel
// (testdata/gen_labelme_reference.py).

// canvas is a class-index mask that the fills paint one value into.
type canvas struct {
	pix  []uint8
	w, h int
	v    uint8
	// touched, when set, grows to the box (x0, y0, x1, y1) of the
	// pixels painted, for a caller that must look at all of them.
	touched *[4]int
}

// hline paints pixels x0..x1 of row y, clipped to the canvas. As in
// Pillow 9 (later versions draw nothing), x1 < x0 paints x1..x0: a span
// between two crossings at the same fractional x paints both pixels
// around it.
func (c canvas) hline(x0, y, x1 int) {
	if y < 0 || y >= c.h {
		return
	}
	if x0 > x1 {
		x0, x1 = x1, x0
	}
	x0, x1 = max(x0, 0), min(x1, c.w-1)
	if t := c.touched; t != nil && x0 <= x1 {
		t[0], t[1], t[2], t[3] = min(t[0], x0), min(t[1], y), max(t[2], x1), max(t[3], y)
	}
	for x := x0; x <= x1; x++ {
		c.pix[y*c.w+x] = c.v
	}
}

// roundUp and roundDown are Pillow's ROUND_UP and ROUND_DOWN: halves
// round away from zero and towards zero.
func roundUp(f float32) int {
	if f >= 0 {
		return int(math.Floor(float64(f + 0.5)))
	}
	return -int(math.Floor(math.Abs(float64(f)) + 0.5))
}

func roundDown(f float32) int {
	if f >= 0 {
		return int(math.Ceil(float64(f - 0.5)))
	}
	return -int(math.Ceil(math.Abs(float64(f)) - 0.5))
}

// roundf is C's roundf: halves away from zero.
func roundf(f float32) float32 { return float32(math.Round(float64(f))) }

// pilEdge is Draw.c's Edge.
type pilEdge struct {
	x0, y0                 int
	xmin, ymin, xmax, ymax int
	dx                     float32
}

func newEdge(x0, y0, x1, y1 int) pilEdge {
	e := pilEdge{x0: x0, y0: y0, xmin: min(x0, x1), xmax: max(x0, x1), ymin: min(y0, y1), ymax: max(y0, y1)}
	if y0 != y1 {
		e.dx = float32(x1-x0) / float32(y1-y0)
	}
	return e
}

// at is the edge's x on row y, computed as Pillow does.
func (e *pilEdge) at(y int) float32 {
	return float32(float32(y-e.y0)*e.dx) + float32(e.x0)
}

// fillEdges is polygon_generic: a scanline fill of the rows the edges
// span, horizontal edges drawn as they are.
func (c canvas) fillEdges(edges []pilEdge) {
	if len(edges) == 0 {
		return
	}
	ymin, ymax := c.h-1, 0
	table := make([]*pilEdge, 0, len(edges))
	for i := range edges {
		e := &edges[i]
		ymin, ymax = min(ymin, e.ymin), max(ymax, e.ymax)
		if e.ymin == e.ymax {
			c.hline(e.xmin, e.ymin, e.xmax)
			continue
		}
		table = append(table, e)
	}
	ymin, ymax = max(ymin, 0), min(ymax, c.h)
	// Pillow tries every edge on every row; only the edges spanning a
	// row can cross it, so these are kept in a list (in table order, on
	// which Pillow's corner rule depends) as the scan goes down.
	order := make([]int, len(table))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return table[a].ymin - table[b].ymin })
	var active []int
	next := 0
	buf := make([]float32, 2*len(table))
	for y := ymin; y <= ymax; y++ {
		for ; next < len(order) && table[order[next]].ymin <= y; next++ {
			i := order[next]
			at, _ := slices.BinarySearch(active, i)
			active = slices.Insert(active, at, i)
		}
		active = slices.DeleteFunc(active, func(i int) bool { return table[i].ymax < y })
		j := 0
		for ai, i := range active {
			cur := table[i]
			buf[j] = cur.at(y)
			j++
			if y == cur.ymax && y < ymax {
				// Pillow counts an edge's end twice, so that a vertex
				// where one edge ends and the next begins stays paired.
				buf[j] = buf[j-1]
				j++
				continue
			}
			if cur.dx == 0 || roundf(buf[j-1]) != buf[j-1] {
				continue
			}
			// At a corner of two edges leaning the same way, Pillow
			// moves a crossing to the next row's (or, on the last row,
			// the previous row's) so that the corner's row has no gap.
			// It stores it at the other edge's index in its crossing
			// list, not at a crossing's, and so does this.
			for _, k := range active[:ai] {
				other := table[k]
				if (cur.dx > 0 && other.dx <= 0) || (cur.dx < 0 && other.dx >= 0) {
					continue
				}
				if !((y == cur.ymin && y == other.ymin) || (y == cur.ymax && y == other.ymax)) || buf[j-1] != other.at(y) {
					continue
				}
				offset := 1
				if y == ymax {
					offset = -1
				}
				adj, adjOther := cur.at(y+offset), other.at(y+offset)
				switch {
				case y == cur.ymax && cur.dx > 0:
					buf[k] = max(adj, adjOther) + 1
				case y == cur.ymax:
					buf[k] = min(adj, adjOther) - 1
				case cur.dx > 0:
					buf[k] = min(adj, adjOther)
				default:
					buf[k] = max(adj, adjOther) + 1
				}
				break
			}
		}
		xx := buf[:j]
		slices.Sort(xx)
		for i := 1; i < len(xx); i += 2 {
			c.hline(roundUp(xx[i-1]), y, roundDown(xx[i]))
		}
	}
}

// fillPolygon is ImageDraw.polygon(xy, fill): xy is x0,y0,x1,y1,…,
// truncated to whole pixels, closed implicitly.
func (c canvas) fillPolygon(xy []float64) {
	n := len(xy) / 2
	if n == 0 {
		return
	}
	p := make([]int, 2*n)
	for i, v := range xy[:2*n] {
		p[i] = int(v)
	}
	edges := make([]pilEdge, 0, n)
	i := 0
	for ; i < n-1; i++ {
		x0, y0, x1, y1 := p[2*i], p[2*i+1], p[2*i+2], p[2*i+3]
		if y0 == y1 && i != 0 && y0 == p[2*i-1] {
			// A horizontal edge after another extends it.
			last := &edges[len(edges)-1]
			if x1 > x0 && x0 > p[2*i-2] {
				last.xmax = x1
				continue
			} else if x1 < x0 && x0 < p[2*i-2] {
				last.xmin = x1
				continue
			}
		}
		edges = append(edges, newEdge(x0, y0, x1, y1))
	}
	if p[2*i] != p[0] || p[2*i+1] != p[1] {
		edges = append(edges, newEdge(p[2*i], p[2*i+1], p[0], p[1]))
	}
	c.fillEdges(edges)
}

// roundUp64 and roundDown64 are ROUND_UP and ROUND_DOWN of a double.
func roundUp64(f float64) int {
	if f >= 0 {
		return int(math.Floor(f + 0.5))
	}
	return -int(math.Floor(math.Abs(f) + 0.5))
}

// fillRectangle is ImageDraw.rectangle((x0, y0, x1, y1), fill) with
// x0 <= x1 and y0 <= y1: corners truncated to whole pixels, both
// included.
func (c canvas) fillRectangle(x0, y0, x1, y1 float64) {
	ix0, iy0, ix1, iy1 := int(x0), int(y0), int(x1), int(y1)
	iy0, iy1 = max(iy0, 0), min(iy1, c.h)
	for y := iy0; y <= iy1; y++ {
		c.hline(ix0, y, ix1)
	}
}

// fillEllipse is ImageDraw.ellipse((x0, y0, x1, y1), fill) with x0 <= x1
// and y0 <= y1: the bounding box truncated to whole pixels, then
// Pillow's ellipse traced on a grid of half pixels and filled row by row.
func (c canvas) fillEllipse(x0, y0, x1, y1 float64) {
	ix0, iy0 := int(x0), int(y0)
	a, b := int(x1)-ix0, int(y1)-iy0
	if a < 0 || b < 0 || a+b < 1 {
		// A fill is an ellipse of width a+b; Pillow draws none below 1.
		return
	}
	// The outer quarter of ellipse_state with a fill's width: the
	// inner one is empty, so every row runs from the axis to the curve.
	q := newQuarter(a, b)
	left := a % 2
	pr, py, ok := q.next()
	for ok {
		y, l, r := py, left, pr
		var cx, cy int
		for {
			cx, cy, ok = q.next()
			if !ok || cy > y {
				break
			}
		}
		if ok {
			pr, py = cx, cy
		}
		seg := func(x0, y, x1 int) {
			c.hline(ix0+(x0+a)/2, iy0+(y+b)/2, ix0+(x1+a)/2)
		}
		lx := l
		if l == 0 {
			lx = 2
		}
		if (l > 0 || l < r) && y > 0 {
			seg(lx, y, r)
		}
		if y > 0 {
			seg(-r, y, -l)
		}
		if l > 0 || l < r {
			seg(lx, -y, r)
		}
		seg(-r, -y, -l)
	}
}

// quarter is Draw.c's quarter_state: the top right quarter of an
// ellipse with semi-axes a/2 and b/2, traced on points (2x+a%2, 2y+b%2).
type quarter struct {
	cx, cy, ex, ey int
	a2, b2, a2b2   int64
	finished       bool
}

func newQuarter(a, b int) *quarter {
	return &quarter{cx: a, cy: b % 2, ex: a % 2, ey: b,
		a2: int64(a) * int64(a), b2: int64(b) * int64(b), a2b2: int64(a) * int64(a) * int64(b) * int64(b)}
}

func (s *quarter) delta(x, y int64) int64 {
	d := s.a2*y*y + s.b2*x*x - s.a2b2
	if d < 0 {
		return -d
	}
	return d
}

func (s *quarter) next() (x, y int, ok bool) {
	if s.finished {
		return 0, 0, false
	}
	x, y = s.cx, s.cy
	if s.cx == s.ex && s.cy == s.ey {
		s.finished = true
		return x, y, true
	}
	nx, ny := s.cx, s.cy+2
	nd := s.delta(int64(nx), int64(ny))
	if nx > 1 {
		if d := s.delta(int64(s.cx-2), int64(s.cy+2)); nd > d {
			nx, ny, nd = s.cx-2, s.cy+2, d
		}
		if d := s.delta(int64(s.cx-2), int64(s.cy)); nd > d {
			nx, ny = s.cx-2, s.cy
		}
	}
	s.cx, s.cy = nx, ny
	return x, y, true
}

// wideLine is ImagingDrawWideLine, how ImageDraw.line draws each segment
// of a line wider than one pixel: a quadrilateral around the segment,
// its ends truncated to whole pixels.
func (c canvas) wideLine(fx0, fy0, fx1, fy1 float64, width int) {
	x0, y0, x1, y1 := int(fx0), int(fy0), int(fx1), int(fy1)
	dx, dy := x1-x0, y1-y0
	if dx == 0 && dy == 0 {
		c.hline(x0, y0, x0)
		return
	}
	big := math.Hypot(float64(dx), float64(dy))
	small := float64(width-1) / 2
	ratioMax := float64(roundUp64(small)) / big
	ratioMin := float64(roundDown64(small)) / big
	dxmin, dxmax := roundDown64(ratioMin*float64(dy)), roundDown64(ratioMax*float64(dy))
	dymin, dymax := roundDown64(ratioMin*float64(dx)), roundDown64(ratioMax*float64(dx))
	v := [4][2]int{
		{x0 - dxmin, y0 + dymax},
		{x1 - dxmin, y1 + dymax},
		{x1 + dxmax, y1 - dymin},
		{x0 + dxmax, y0 - dymin},
	}
	c.fillEdges([]pilEdge{
		newEdge(v[0][0], v[0][1], v[1][0], v[1][1]),
		newEdge(v[1][0], v[1][1], v[2][0], v[2][1]),
		newEdge(v[2][0], v[2][1], v[3][0], v[3][1]),
		newEdge(v[3][0], v[3][1], v[0][0], v[0][1]),
	})
}

func roundDown64(f float64) int {
	if f >= 0 {
		return int(math.Ceil(f - 0.5))
	}
	return -int(math.Ceil(math.Abs(f) - 0.5))
}
