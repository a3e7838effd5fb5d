package inference

import (
	"errors"
	"fmt"
	"image"
	"math"
	"strconv"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/runtime"
)

// Dense asks for sliding-window inference and test-time augmentation: the
// model runs on tiles of the input tensor (and on flipped or rescaled
// copies of each tile), and the class scores of every run are summed,
// weighted, before the arg-max. Labels are never voted on.
type Dense struct {
	// TileHeight×TileWidth is the window, 0×0 for the whole tensor. A
	// tensor smaller than the window in a side is taken whole in that side.
	TileHeight int `json:"tile_height,omitempty"`
	TileWidth  int `json:"tile_width,omitempty"`
	// Overlap is the fraction of a window shared with its neighbour, in
	// [0, 1): the stride is the window side times 1−Overlap.
	Overlap float64 `json:"overlap,omitempty"`
	// Flip adds a horizontally mirrored run of every window.
	Flip bool `json:"flip,omitempty"`
	// Scales lists the factors each window is resized by before a run (its
	// scores are resized back); empty means {1}.
	Scales []float64 `json:"scales,omitempty"`
}

// String describes d as its flags would: "tile 512x512, overlap 0.25,
// flip, scales 0.75,1".
func (d Dense) String() string {
	var parts []string
	if d.TileHeight > 0 {
		parts = append(parts, fmt.Sprintf("tile %dx%d, overlap %v", d.TileHeight, d.TileWidth, d.Overlap))
	}
	if d.Flip {
		parts = append(parts, "flip")
	}
	if len(d.Scales) > 0 {
		s := make([]string, len(d.Scales))
		for i, v := range d.Scales {
			s[i] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		parts = append(parts, "scales "+strings.Join(s, ","))
	}
	if len(parts) == 0 {
		return "whole images"
	}
	return strings.Join(parts, ", ")
}

// ErrDense is wrapped by every refusal of a Dense setting.
var ErrDense = errors.New("invalid tiling or test-time augmentation")

// errLabelsOnly refuses what needs scores of a segmenter OpenLabels opened
// on its label graph.
var errLabelsOnly = errors.New("the session gives labels only (inference.OpenLabels); open the model with inference.Open for scores, tiling or TTA")

// maxScale bounds a TTA scale so that a typo cannot ask for a huge tensor.
const maxScale = 4

// ParseTTA reads test-time augmentation written as "flip",
// "scales=S1,S2,…" or both, comma-separated (flip,scales=0.75,1,1.25),
// into d, and validates d; "" asks for none.
func (d *Dense) ParseTTA(v string) error {
	if v == "" {
		return nil
	}
	inScales := false
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "flip":
			d.Flip, inScales = true, false
		case strings.HasPrefix(f, "scales="):
			f, inScales = strings.TrimPrefix(f, "scales="), true
			fallthrough
		case inScales:
			s, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return fmt.Errorf("scale %q is not a number", f)
			}
			d.Scales = append(d.Scales, s)
		default:
			return fmt.Errorf("%q is neither flip nor scales=…", f)
		}
	}
	return d.Validate()
}

// Validate checks d on its own, before any model is opened.
func (d *Dense) Validate() error {
	switch {
	case d.TileHeight < 0 || d.TileWidth < 0 || (d.TileHeight == 0) != (d.TileWidth == 0):
		return fmt.Errorf("%w: tile %dx%d (HxW) needs both sides positive", ErrDense, d.TileHeight, d.TileWidth)
	case d.TileHeight > 1<<15 || d.TileWidth > 1<<15:
		return fmt.Errorf("%w: tile %dx%d (HxW) is larger than %d", ErrDense, d.TileHeight, d.TileWidth, 1<<15)
	case !(d.Overlap >= 0 && d.Overlap < 1):
		return fmt.Errorf("%w: overlap %v is not in [0, 1)", ErrDense, d.Overlap)
	}
	for _, s := range d.Scales {
		if !(s > 0 && s <= maxScale) {
			return fmt.Errorf("%w: scale %v is not in (0, %d]", ErrDense, s, maxScale)
		}
	}
	return nil
}

// scales is Scales, or {1}.
func (d *Dense) scales() []float64 {
	if len(d.Scales) == 0 {
		return []float64{1}
	}
	return d.Scales
}

// SetDense switches s to sliding-window and TTA inference (nil switches it
// back), once d passes CheckContract.
func (s *Segmenter) SetDense(d *Dense) error {
	if d == nil {
		s.dense = nil
		return nil
	}
	if s.graphLabels {
		return errLabelsOnly
	}
	if err := d.CheckContract(s.Contract); err != nil {
		return err
	}
	c := *d
	s.dense = &c
	return nil
}

// CheckContract validates d and checks it against a model's contract
// before the model is run: a model that emits labels has no scores to
// blend, and one with a fixed input size cannot run on other window sizes.
func (d *Dense) CheckContract(ct *contract.Contract) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if ct.Kind == contract.Labels {
		return fmt.Errorf("%w: the model outputs labels, not scores, so there is nothing to blend", ErrDense)
	}
	if ct.Height > 0 && ct.Width > 0 {
		if d.TileHeight > 0 {
			return fmt.Errorf("%w: the model takes a fixed %dx%d (HxW) input, and tiles would feed it windows of another size", ErrDense, ct.Height, ct.Width)
		}
		for _, sc := range d.scales() {
			if sc != 1 {
				return fmt.Errorf("%w: the model takes a fixed %dx%d (HxW) input; TTA scales would change it", ErrDense, ct.Height, ct.Width)
			}
		}
	}
	return nil
}

// maxWindows bounds the windows of one input: a tiny tile or an overlap
// near 1 would otherwise run the model for hours on a small image (512×512
// tiles at overlap 0.25 make 7396 windows of a 32768×32768 input).
const maxWindows = 1 << 14

// window returns the window for a tensor of h×w and the stride in each side.
func (d *Dense) window(h, w int) (th, tw, sy, sx int) {
	th, tw = h, w
	if d.TileHeight > 0 {
		th, tw = min(d.TileHeight, h), min(d.TileWidth, w)
	}
	stride := func(n int) int { return max(1, int(math.Round(float64(n)*(1-d.Overlap)))) }
	return th, tw, stride(th), stride(tw)
}

// starts are the window offsets along a side of n: every stride, and a last
// window flush with the far edge, so that each pixel is covered.
func starts(n, win, stride int) []int {
	var s []int
	for p := 0; ; p += stride {
		if p+win >= n {
			return append(s, n-win)
		}
		s = append(s, p)
	}
}

// ramp is the blending weight along a window side of n: a linear ramp
// rising from the window's edges to its middle (1, 2, …, ⌈n/2⌉, …, 2, 1),
// so that where windows overlap the one whose centre is nearer counts more;
// scores near a window's border, where the model saw less context, count
// less.
func ramp(n int) []float32 {
	r := make([]float32, n)
	for i := range r {
		r[i] = float32(min(i+1, n-i))
	}
	return r
}

// denseEstimate is Estimate for dense inference: the input tensors, one
// model run over the largest window (at the largest scale), the score
// band of window height and tensor width, and the label map.
func (s *Segmenter) denseEstimate(n int, shape pipeline.Shape) int64 {
	h, w := shape[1], shape[2]
	th, tw, _, _ := s.dense.window(h, w)
	big := 1.0
	for _, sc := range s.dense.scales() {
		big = max(big, sc)
	}
	rh, rw := int(math.Ceil(float64(th)*big)), int(math.Ceil(float64(tw)*big))
	classes := int64(max(s.Contract.Classes, 1))
	if s.Contract.Classes <= 0 {
		classes = unknownClasses
	}
	run := s.Estimate(1, pipeline.Shape{shape[0], rh, rw})
	// Per pixel of the window at its largest: the CHW copy, resized copies
	// and scores at input size.
	scratch := memlimit.Product(int64(rh), int64(rw), 4*(2*int64(shape[0])+2*classes))
	band := memlimit.Product(classes, int64(th), int64(w), 4)
	input := memlimit.Product(int64(n), int64(shape[0]), int64(h), int64(w)*4)
	labels := memlimit.Product(int64(n), int64(h), int64(w), 1)
	total := int64(0)
	for _, b := range []int64{input, run, scratch, band, labels} {
		if total > math.MaxInt64-b { // saturates, as each term does
			return math.MaxInt64
		}
		total += b
	}
	return total
}

// windowsFromImage reports whether windows are preprocessed one by one
// from the decoded image, so that no float tensor of the whole image is
// made: when tiling an image kept at its native size.
func (s *Segmenter) windowsFromImage() bool {
	return s.dense != nil && s.dense.TileHeight > 0
}

// inferItems is the pipeline's InferItems under dense inference (nil
// otherwise): each item's label map, at its tensor's size, goes to Finish
// in Output.Meta.
func (s *Segmenter) inferItems() func([]pipeline.Prepared) ([]pipeline.Output, error) {
	if s.dense == nil {
		return nil
	}
	return func(items []pipeline.Prepared) ([]pipeline.Output, error) {
		res := make([]pipeline.Output, len(items))
		for i, p := range items {
			h, w := p.Shape[1], p.Shape[2]
			crop := func(r image.Rectangle, dst []float32) error {
				s.cropCHW(p.Input, h, w, r, dst)
				return nil
			}
			if p.Input == nil {
				crop = s.imageWindows(p.Meta.(Item).Image)
			}
			labels, err := s.denseLabels(crop, h, w)
			if err != nil {
				return nil, err
			}
			res[i] = pipeline.Output{Shape: []int64{int64(h), int64(w)}, Meta: labels}
		}
		return res, nil
	}
}

// imageWindows returns a crop function that preprocesses rectangle r of
// img (at its native size) into dst, CHW.
func (s *Segmenter) imageWindows(img image.Image) func(r image.Rectangle, dst []float32) error {
	pre := s.Pre
	pre.Layout = imageio.NCHW
	sub, ok := img.(interface {
		SubImage(image.Rectangle) image.Image
	})
	return func(r image.Rectangle, dst []float32) error {
		if !ok {
			return fmt.Errorf("a %T image cannot be cut into windows", img)
		}
		_, err := pre.Tensor(sub.SubImage(r.Add(img.Bounds().Min)), dst)
		return err
	}
}

// denseLabels runs dense inference on one input of h×w whose windows crop
// copies, CHW, and returns its label map at that size.
func (s *Segmenter) denseLabels(crop func(r image.Rectangle, dst []float32) error, h, w int) ([]uint8, error) {
	labels := make([]uint8, h*w)
	err := s.blend(s.dense, crop, h, w, func(band []float32, classes, th, row, r int) {
		argmaxRow(band, classes, th, w, r, labels[row*w:(row+1)*w])
	})
	if err != nil {
		return nil, err
	}
	return labels, nil
}

// DenseScores runs dense inference, as SetDense set it (the whole tensor
// once without it), on one preprocessed input tensor of h×w in the
// preprocessing's layout, and returns the blended class scores laid out
// [classes][h][w] with the class count: at each pixel the weighted mean,
// over the windows covering it and their augmented runs, of the scores in
// the model's own kind (ClassScores: logits, probabilities,
// log-probabilities or thresholded planes), so that their arg-max is the
// label dense inference gives. A single run's scores come back as they
// are, up to float rounding.
func (s *Segmenter) DenseScores(input []float32, h, w int) ([]float32, int, error) {
	if s.graphLabels {
		return nil, 0, errLabelsOnly
	}
	if h < 1 || w < 1 || len(input) != imageio.Channels*h*w {
		return nil, 0, fmt.Errorf("an input of %d values is not a %dx%d image of %d channels", len(input), h, w, imageio.Channels)
	}
	d := s.dense
	if d == nil {
		d = &Dense{}
	}
	th, tw, sy, sx := d.window(h, w)
	wy, wx := coverage(h, th, sy), coverage(w, tw, sx)
	runs := float32(len(d.scales()))
	if d.Flip {
		runs *= 2
	}
	var out []float32
	classes := 0
	crop := func(r image.Rectangle, dst []float32) error {
		s.cropCHW(input, h, w, r, dst)
		return nil
	}
	err := s.blend(d, crop, h, w, func(band []float32, n, bh, row, r int) {
		if out == nil {
			classes, out = n, make([]float32, n*h*w) // the size of the whole-image run's scores
		}
		for c := 0; c < n; c++ {
			src := band[(c*bh+r)*w : (c*bh+r+1)*w]
			dst := out[(c*h+row)*w : (c*h+row+1)*w]
			for x, v := range src {
				dst[x] = v / (wy[row] * wx[x] * runs)
			}
		}
	})
	if err != nil {
		return nil, 0, err
	}
	return out, classes, nil
}

// coverage is the total ramp weight each position along a side of n gets
// from the windows of win at stride covering it. The blending weight of a
// window pixel is the product of its row's and column's ramps, and the
// windows form a grid, so a pixel's total weight is the product of its
// row's and its column's coverage.
func coverage(n, win, stride int) []float32 {
	total := make([]float32, n)
	r := ramp(win)
	for _, p := range starts(n, win, stride) {
		for i, v := range r {
			total[p+i] += v
		}
	}
	return total
}

// blend runs dense inference with d on one input of h×w whose windows crop
// copies, CHW, and hands each row of the weighted sum of scores to done
// once it is final: band holds [classes][th][w] and the tensor's row is
// band row r. Scores are summed into a band of window-height rows that
// slides down the tensor: rows above the next row of windows are final,
// so they are handed on and the band moves on, and the scores of the whole
// tensor are never held at once.
func (s *Segmenter) blend(d *Dense, crop func(r image.Rectangle, dst []float32) error, h, w int,
	done func(band []float32, classes, th, row, r int)) error {
	th, tw, sy, sx := d.window(h, w)
	ys, xs := starts(h, th, sy), starts(w, tw, sx)
	if n := len(ys) * len(xs); n > maxWindows {
		return fmt.Errorf("%w: tiles of %dx%d every %dx%d pixels make %d windows of this %dx%d input, more than %d: use a larger tile or a smaller overlap",
			ErrDense, th, tw, sy, sx, n, h, w, maxWindows)
	}
	wy, wx := ramp(th), ramp(tw)
	var band []float32 // [classes][th][w], rows base…base+th-1
	classes, base := 0, 0
	flush := func(to int) { // hand rows base…to-1 on and slide the band
		for r := base; r < to; r++ {
			done(band, classes, th, r, r-base)
		}
		shift := to - base
		for c := 0; c < classes; c++ {
			plane := band[c*th*w : (c+1)*th*w]
			copy(plane, plane[shift*w:])
			clear(plane[(th-shift)*w:])
		}
		base = to
	}
	tile := make([]float32, imageio.Channels*th*tw)
	for _, y := range ys {
		if band != nil && y > base {
			flush(y)
		}
		for _, x := range xs {
			if err := crop(image.Rect(x, y, x+tw, y+th), tile); err != nil {
				return err
			}
			scores, n, err := s.augmented(d, tile, th, tw)
			if err != nil {
				return err
			}
			if band == nil {
				classes = n
				band = make([]float32, classes*th*w) // within the estimate checked before the batch
			} else if n != classes {
				return fmt.Errorf("the model gave %d classes on one window and %d on another", classes, n)
			}
			for c := 0; c < classes; c++ {
				for ty := 0; ty < th; ty++ {
					dst := band[(c*th+y-base+ty)*w+x : (c*th+y-base+ty)*w+x+tw]
					src := scores[(c*th+ty)*tw : (c*th+ty+1)*tw]
					for tx, v := range src {
						dst[tx] += v * wy[ty] * wx[tx]
					}
				}
			}
		}
	}
	flush(h)
	return nil
}

// argmaxRow writes the arg-max class of band row r (the lower class on a
// tie) to out.
func argmaxRow(band []float32, classes, th, w, r int, out []uint8) {
	clear(out)
	best := band[r*w : (r+1)*w]
	for c := 1; c < classes; c++ {
		row := band[(c*th+r)*w : (c*th+r+1)*w]
		for x, v := range row {
			if v > best[x] { // best is band row r of class 0, done with after this
				best[x], out[x] = v, uint8(c)
			}
		}
	}
}

// augmented runs the model on a CHW window of h×w at each of d's scales,
// and mirrored too with Flip, and returns the sum of the class scores, CHW at
// the window's size, and the class count.
func (s *Segmenter) augmented(d *Dense, tile []float32, h, w int) ([]float32, int, error) {
	var sum []float32
	classes := 0
	for _, sc := range d.scales() {
		in, rh, rw := tile, h, w
		if sc != 1 {
			rh, rw = max(1, int(math.Round(float64(h)*sc))), max(1, int(math.Round(float64(w)*sc)))
			in = make([]float32, imageio.Channels*rh*rw)
			if err := resizePlanes(tile, imageio.Channels, h, w, in, rh, rw); err != nil {
				return nil, 0, err
			}
		}
		flips := []bool{false}
		if d.Flip {
			flips = append(flips, true)
		}
		for _, flip := range flips {
			run := in
			if flip {
				run = flipPlanes(in, imageio.Channels, rh, rw)
			}
			scores, n, oh, ow, err := s.runCHW(run, rh, rw)
			if err != nil {
				return nil, 0, err
			}
			if flip {
				scores = flipPlanes(scores, n, oh, ow)
			}
			if oh != h || ow != w {
				back := make([]float32, n*h*w)
				if err := resizePlanes(scores, n, oh, ow, back, h, w); err != nil {
					return nil, 0, err
				}
				scores = back
			}
			if sum == nil {
				classes, sum = n, make([]float32, n*h*w)
			} else if n != classes {
				return nil, 0, fmt.Errorf("the model gave %d classes at one scale and %d at another", classes, n)
			}
			for i, v := range scores {
				sum[i] += v
			}
		}
	}
	return sum, classes, nil
}

// runCHW runs the model on one CHW tensor of h×w and returns its class
// scores, CHW, at the output's resolution.
func (s *Segmenter) runCHW(chw []float32, h, w int) ([]float32, int, int, int, error) {
	rows := max(s.FixedBatch, 1)
	per := imageio.Channels * h * w
	batch := make([]float32, rows*per) // padding rows stay blank
	if s.inputLayout() == contract.NHWC {
		for c := 0; c < imageio.Channels; c++ {
			for i, v := range chw[c*h*w : (c+1)*h*w] {
				batch[i*imageio.Channels+c] = v
			}
		}
	} else {
		copy(batch, chw)
	}
	outs, err := s.Session.Run(runtime.NewFloat32(s.inputLayout().Shape(rows, h, w), batch))
	if err != nil {
		return nil, 0, 0, 0, err
	}
	o := outs[s.output]
	if len(o.Shape) < 3 || int(o.Shape[0]) != rows {
		return nil, 0, 0, 0, fmt.Errorf("model output has shape %v for a batch of %d", o.Shape, rows)
	}
	if err := s.Contract.CheckRun(o.Shape, h, w); err != nil {
		return nil, 0, 0, 0, err
	}
	one := o.Float32[:len(o.Float32)/rows]
	if err := s.Contract.CheckFinite(one); err != nil {
		return nil, 0, 0, 0, err
	}
	scores, classes, oh, ow, err := s.Contract.ClassScores(one, o.Shape[1:], nil)
	return scores, classes, oh, ow, err
}

// cropCHW copies rectangle r of the h×w input tensor (in the
// preprocessing's layout) into dst as CHW.
func (s *Segmenter) cropCHW(in []float32, h, w int, r image.Rectangle, dst []float32) {
	tw, th := r.Dx(), r.Dy()
	nhwc := s.inputLayout() == contract.NHWC
	for c := 0; c < imageio.Channels; c++ {
		for y := 0; y < th; y++ {
			out := dst[(c*th+y)*tw : (c*th+y+1)*tw]
			if !nhwc {
				copy(out, in[(c*h+r.Min.Y+y)*w+r.Min.X:])
				continue
			}
			row := in[((r.Min.Y+y)*w+r.Min.X)*imageio.Channels:]
			for x := range out {
				out[x] = row[x*imageio.Channels+c]
			}
		}
	}
}

// flipPlanes returns a copy of n planes of h×w mirrored left to right.
func flipPlanes(src []float32, n, h, w int) []float32 {
	dst := make([]float32, n*h*w)
	for r := 0; r < n*h; r++ {
		in, out := src[r*w:(r+1)*w], dst[r*w:(r+1)*w]
		for x, v := range in {
			out[w-1-x] = v
		}
	}
	return dst
}

// resizePlanes resizes n planes of sh×sw bilinearly (half-pixel centres)
// into dst as n planes of dh×dw, the way logits are restored.
func resizePlanes(src []float32, n, sh, sw int, dst []float32, dh, dw int) error {
	g := imageio.Geometry{SrcWidth: dw, SrcHeight: dh, Width: sw, Height: sh, Content: image.Rect(0, 0, sw, sh)}
	return g.RestoreScores(src, n, dst)
}
