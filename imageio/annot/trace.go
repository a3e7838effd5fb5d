package annot

import (
	"container/heap"
	"math"
	"slices"
)

// Tracing a label map into LabelMe polygons. Each region (pixels of one
// label, 8-connected; background 4-connected, so that it cannot leak
// through a diagonal gap) is outlined through the centres of its boundary
// pixels, which is where Pillow's fill, truncating vertices to whole
// pixels and filling spans end to end, paints exactly the region and its
// holes. The outline is simplified by Douglas–Peucker within
// polygonTolerance, and kept only if labelme's own fill of it (the
// reader's, pildraw.go) gives back the same pixels; otherwise the
// unsimplified outline is used, and where even that misses a pixel, the
// region becomes a mask shape. A polygon paints the region's holes too, so
// whatever lies in them (other regions, or background as a "_background_"
// shape) is drawn after it: shapes are ordered by this containment.

// polygonTolerance is the furthest a simplified outline may pass from
// the pixel centres it replaces.
const polygonTolerance = 0.5

// ring is the 8 neighbours of a pixel, clockwise on the screen (y down)
// from the west.
var ring = [8][2]int{{-1, 0}, {-1, -1}, {0, -1}, {1, -1}, {1, 0}, {1, 1}, {0, 1}, {-1, 1}}

func ringIndex(dx, dy int) int {
	for i, d := range ring {
		if d[0] == dx && d[1] == dy {
			return i
		}
	}
	return 0
}

// region is one connected region of a label map.
type region struct {
	label          uint8
	start          int // first pixel in row order: its top-left-most
	x0, y0, x1, y1 int // bounding box, inclusive
	pixels         int
}

// findRegions labels the regions of a w×h label map: comp[i] is pixel
// i's region.
func findRegions(labels []uint8, w, h int) ([]int32, []region) {
	comp := make([]int32, len(labels))
	for i := range comp {
		comp[i] = -1
	}
	var regions []region
	var stack []int
	for i, v := range labels {
		if comp[i] >= 0 {
			continue
		}
		id := int32(len(regions))
		r := region{label: v, start: i, x0: w, y0: h, x1: -1, y1: -1}
		n := 8
		if v == 0 {
			n = 4 // the even neighbours of ring: W, N, E, S
		}
		comp[i] = id
		stack = append(stack[:0], i)
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			x, y := p%w, p/w
			r.x0, r.y0, r.x1, r.y1 = min(r.x0, x), min(r.y0, y), max(r.x1, x), max(r.y1, y)
			r.pixels++
			for k := 0; k < 8; k += 8 / n {
				nx, ny := x+ring[k][0], y+ring[k][1]
				if nx < 0 || ny < 0 || nx >= w || ny >= h {
					continue
				}
				if q := ny*w + nx; comp[q] < 0 && labels[q] == v {
					comp[q] = id
					stack = append(stack, q)
				}
			}
		}
		regions = append(regions, r)
	}
	return comp, regions
}

// traceOuter walks region id's outer boundary (Moore neighbour tracing,
// stopped by Jacob's criterion) from its first pixel, and returns the
// boundary pixels in order as x0,y0,x1,y1,…; nil if the walk does not
// close within the steps a boundary can take.
func traceOuter(comp []int32, id int32, w, h int, r region) []int {
	in := func(x, y int) bool { return x >= 0 && y >= 0 && x < w && y < h && comp[y*w+x] == id }
	sx, sy := r.start%w, r.start/w
	pts := []int{sx, sy}
	x, y, back, first := sx, sy, 0, -1 // back: the direction of the last pixel outside
	for steps := 0; steps <= 4*r.pixels+8; steps++ {
		k := 1
		for ; k <= 8 && !in(x+ring[(back+k)%8][0], y+ring[(back+k)%8][1]); k++ {
		}
		if k > 8 {
			return pts // a single pixel
		}
		d := (back + k) % 8
		if x == sx && y == sy {
			if d == first {
				return pts[:len(pts)-2] // back at the start, as at first
			}
			if first < 0 {
				first = d
			}
		}
		prev := ring[(back+k-1)%8]
		bx, by := x+prev[0], y+prev[1]
		x, y = x+ring[d][0], y+ring[d][1]
		back = ringIndex(bx-x, by-y)
		pts = append(pts, x, y)
	}
	return nil
}

// dropCollinear removes the vertices of a closed polygon (x,y pairs) that
// lie on a straight run between their neighbours, and repeated ones: the
// same outline with fewer points.
func dropCollinear(p []int) []int {
	straight := func(ax, ay, bx, by, cx, cy int) bool {
		ux, uy, vx, vy := bx-ax, by-ay, cx-bx, cy-by
		return (ux == 0 && uy == 0) || (ux*vy-uy*vx == 0 && ux*vx+uy*vy > 0)
	}
	out := make([]int, 0, len(p))
	for i := 0; i < len(p); i += 2 {
		out = append(out, p[i], p[i+1])
		for n := len(out); n >= 6 && straight(out[n-6], out[n-5], out[n-4], out[n-3], out[n-2], out[n-1]); n = len(out) {
			out = append(out[:n-4], out[n-2:]...)
		}
	}
	for changed := true; changed && len(out) >= 6; {
		changed = false
		n := len(out)
		if straight(out[n-4], out[n-3], out[n-2], out[n-1], out[0], out[1]) {
			out, changed = out[:n-2], true
		} else if straight(out[n-2], out[n-1], out[0], out[1], out[2], out[3]) {
			out, changed = out[2:], true
		}
	}
	return out
}

// segmentDistance is the distance from (px, py) to the segment a–b.
func segmentDistance(px, py, ax, ay, bx, by float64) float64 {
	dx, dy := bx-ax, by-ay
	t := 0.0
	if l := dx*dx + dy*dy; l > 0 {
		t = max(0, min(1, ((px-ax)*dx+(py-ay)*dy)/l))
	}
	return math.Hypot(px-ax-t*dx, py-ay-t*dy)
}

// simplify is Douglas–Peucker on a closed polygon: split at the vertex
// farthest from the first, and each chain simplified within tol.
func simplify(p []int, tol float64) []int {
	n := len(p) / 2
	if n <= 4 {
		return p
	}
	far, best := 0, -1.0
	for i := 1; i < n; i++ {
		if d := math.Hypot(float64(p[2*i]-p[0]), float64(p[2*i+1]-p[1])); d > best {
			far, best = i, d
		}
	}
	keep := make([]bool, n+1) // index n is vertex 0 again, closing the ring
	keep[0], keep[far], keep[n] = true, true, true
	at := func(i int) (float64, float64) { i %= n; return float64(p[2*i]), float64(p[2*i+1]) }
	type span struct{ a, b int }
	todo := []span{{0, far}, {far, n}}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		ax, ay := at(s.a)
		bx, by := at(s.b)
		worst, dmax := -1, tol
		for i := s.a + 1; i < s.b; i++ {
			px, py := at(i)
			if d := segmentDistance(px, py, ax, ay, bx, by); d > dmax {
				worst, dmax = i, d
			}
		}
		if worst >= 0 {
			keep[worst] = true
			todo = append(todo, span{s.a, worst}, span{worst, s.b})
		}
	}
	var out []int
	for i := range n {
		if keep[i] {
			out = append(out, p[2*i], p[2*i+1])
		}
	}
	return out
}

// traced is one region's shape: a polygon (x,y pairs), or nil for a
// mask of the region's pixels; holes are the pixels the polygon paints
// that are not the region's.
type traced struct {
	poly  []int
	holes []int // pixel indices
}

// tracer outlines the regions of one label map, with a canvas to fill
// candidate polygons into.
type tracer struct {
	w, h    int
	comp    []int32
	regions []region
	scratch canvas
}

func newTracer(labels []uint8, w, h int) *tracer {
	comp, regions := findRegions(labels, w, h)
	return &tracer{w: w, h: h, comp: comp, regions: regions, scratch: canvas{pix: make([]uint8, w*h), w: w, h: h, v: 1}}
}

// filled is region id with its holes: the pixels of its bounding box
// that the outside (4-connected, from the box's border) does not reach.
// It is indexed within the box.
func (t *tracer) filled(id int32) []bool {
	r := t.regions[id]
	bw, bh := r.x1-r.x0+1, r.y1-r.y0+1
	outside := make([]bool, bw*bh)
	var stack []int
	push := func(x, y int) {
		if i := y*bw + x; !outside[i] && t.comp[(r.y0+y)*t.w+r.x0+x] != id {
			outside[i] = true
			stack = append(stack, i)
		}
	}
	for x := range bw {
		push(x, 0)
		push(x, bh-1)
	}
	for y := range bh {
		push(0, y)
		push(bw-1, y)
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		x, y := i%bw, i/bw
		for k := 0; k < 8; k += 2 {
			if nx, ny := x+ring[k][0], y+ring[k][1]; nx >= 0 && ny >= 0 && nx < bw && ny < bh {
				push(nx, ny)
			}
		}
	}
	for i := range outside {
		outside[i] = !outside[i]
	}
	return outside
}

// raster fills poly as labelme would and compares it with region id:
// whether it equals want (indexed within the region's box), whether it
// covers the region, and the other pixels it paints.
func (t *tracer) raster(id int32, poly []int, want []bool) (same, covers bool, extra []int) {
	r := t.regions[id]
	xy := make([]float64, 0, max(len(poly), 6))
	for _, v := range poly {
		xy = append(xy, float64(v))
	}
	for len(xy) < 6 { // LabelMe wants 3 points: repeat the last
		xy = append(xy, xy[len(xy)-2], xy[len(xy)-1])
	}
	// Pillow's corner rule can move a span's end past the vertices: look
	// at every pixel painted, as well as the region's box.
	touched := [4]int{r.x0, r.y0, r.x1, r.y1}
	t.scratch.touched = &touched
	t.scratch.fillPolygon(xy)
	t.scratch.touched = nil
	same, covers = true, true
	bw := r.x1 - r.x0 + 1
	for y := touched[1]; y <= touched[3]; y++ {
		for x := touched[0]; x <= touched[2]; x++ {
			i := y*t.w + x
			painted := t.scratch.pix[i] != 0
			t.scratch.pix[i] = 0
			inBox := x >= r.x0 && x <= r.x1 && y >= r.y0 && y <= r.y1
			same = same && painted == (inBox && want[(y-r.y0)*bw+x-r.x0])
			if t.comp[i] == id {
				covers = covers && painted
			} else if painted {
				extra = append(extra, i)
			}
		}
	}
	return same, covers, extra
}

// trace outlines region id.
func (t *tracer) trace(id int32) traced {
	outline := traceOuter(t.comp, id, t.w, t.h, t.regions[id])
	if outline == nil {
		return traced{}
	}
	outline = dropCollinear(outline)
	want := t.filled(id)
	if short := simplify(outline, polygonTolerance); len(short) < len(outline) {
		if same, _, extra := t.raster(id, short, want); same {
			return traced{poly: short, holes: extra}
		}
	}
	if _, covers, extra := t.raster(id, outline, want); covers {
		return traced{poly: outline, holes: extra}
	}
	return traced{}
}

// plannedShape is one shape of a LabelMe file: region id, as a polygon
// or (poly nil) a mask.
type plannedShape struct {
	id   int32
	poly []int
}

// plan orders the shapes that redraw the label map: every region but the
// background's, and the background regions inside another's polygon.
// A region is drawn after every polygon that paints over it; regions
// that would have to come before each other become masks.
func (t *tracer) plan() []plannedShape {
	cache := map[int32]traced{}
	asMask := map[int32]bool{}
	get := func(id int32) traced {
		if asMask[id] {
			return traced{}
		}
		tr, ok := cache[id]
		if !ok {
			tr = t.trace(id)
			cache[id] = tr
		}
		return tr
	}
	for {
		// The regions drawn, and which come after which.
		drawn := map[int32]bool{}
		var queue []int32
		for id, r := range t.regions {
			if r.label != 0 {
				drawn[int32(id)] = true
				queue = append(queue, int32(id))
			}
		}
		after := map[int32][]int32{}
		before := map[int32]int{}
		for len(queue) > 0 {
			id := queue[0]
			queue = queue[1:]
			seen := map[int32]bool{}
			for _, p := range get(id).holes {
				d := t.comp[p]
				if seen[d] {
					continue
				}
				seen[d] = true
				after[id] = append(after[id], d)
				before[d]++
				if !drawn[d] {
					drawn[d] = true
					queue = append(queue, d)
				}
			}
		}
		// Kahn's order, regions in row order of their first pixel when
		// free to choose.
		ready := &idHeap{}
		var order []int32
		for id := range drawn {
			if before[id] == 0 {
				heap.Push(ready, id)
			}
		}
		for ready.Len() > 0 {
			id := heap.Pop(ready).(int32)
			order = append(order, id)
			for _, d := range after[id] {
				if before[d]--; before[d] == 0 {
					heap.Push(ready, d)
				}
			}
		}
		if len(order) == len(drawn) {
			out := make([]plannedShape, len(order))
			for i, id := range order {
				out[i] = plannedShape{id: id, poly: get(id).poly}
			}
			return out
		}
		// Each cycle of regions drawn before each other loses its
		// smallest region to a mask, which paints no holes.
		for _, scc := range cycles(after) {
			small := scc[0]
			for _, id := range scc[1:] {
				if t.regions[id].pixels < t.regions[small].pixels || (t.regions[id].pixels == t.regions[small].pixels && id < small) {
					small = id
				}
			}
			asMask[small] = true
		}
	}
}

// cycles are the strongly connected components of more than one region
// in the graph after (Tarjan's algorithm).
func cycles(after map[int32][]int32) [][]int32 {
	index, low := map[int32]int{}, map[int32]int{}
	onStack := map[int32]bool{}
	var stack []int32
	var out [][]int32
	var visit func(v int32)
	visit = func(v int32) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range after[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []int32
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			out = append(out, scc)
		}
	}
	ids := make([]int32, 0, len(after))
	for id := range after {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, seen := index[id]; !seen {
			visit(id)
		}
	}
	return out
}

// idHeap is a min-heap of region ids.
type idHeap []int32

func (h idHeap) Len() int           { return len(h) }
func (h idHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h idHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idHeap) Push(x any)        { *h = append(*h, x.(int32)) }
func (h *idHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
