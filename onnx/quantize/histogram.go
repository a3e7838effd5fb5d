package quantize

import "math"

// histogram counts values in 2·half bins of width stride that cover
// [−half·stride, half·stride], zero being a bin edge. It grows
// symmetrically when a batch goes beyond it, keeping its bin width (as
// onnxruntime's HistogramCollector does), and halves its resolution when
// it would exceed maxBins, so that a tensor whose first batch was tiny
// cannot make it grow without bound.
type histogram struct {
	counts   []float64
	stride   float64
	half     int
	min, max float32
	seen     bool
	maxBins  int
}

func newHistogram(bins int) *histogram {
	if bins < 2 {
		bins = 2
	}
	bins += bins % 2
	return &histogram{half: bins / 2, maxBins: 16 * bins}
}

// add counts xs (or their absolute values when abs is set, into the upper
// half only).
func (h *histogram) add(xs []float32, abs bool) {
	if len(xs) == 0 {
		return
	}
	lo, hi := minMax(xs)
	if !h.seen {
		h.min, h.max = lo, hi
	} else {
		h.min, h.max = min(h.min, lo), max(h.max, hi)
	}
	t := math.Max(math.Abs(float64(lo)), math.Abs(float64(hi)))
	switch {
	case !h.seen || h.stride == 0:
		h.seen = true
		if t == 0 {
			// All zeros so far: no width to give the bins yet.
			h.counts = make([]float64, 2*h.half)
			h.counts[h.half] += float64(len(xs))
			return
		}
		old := h.counts
		h.stride = t / float64(h.half)
		h.counts = make([]float64, 2*h.half)
		if old != nil { // earlier all-zero batches
			h.counts[h.half] += old[h.half]
		}
	case t > float64(h.half)*h.stride:
		extra := int(math.Floor((t-float64(h.half)*h.stride)/h.stride)) + 1
		h.grow(extra)
	}
	top := float64(h.half) * h.stride
	for _, x := range xs {
		v := float64(x)
		if abs {
			v = math.Abs(v)
		}
		if math.IsNaN(v) {
			continue
		}
		i := int(math.Floor(v/h.stride)) + h.half
		if v >= top {
			i = 2*h.half - 1
		}
		if i < 0 {
			i = 0
		}
		h.counts[i]++
	}
}

// grow adds extra bins on each side, coarsening first while the result
// would be larger than maxBins.
func (h *histogram) grow(extra int) {
	for 2*(h.half+extra) > h.maxBins {
		if h.half%2 == 1 {
			extra--
		}
		h.halve()
		extra = (extra + 1) / 2
	}
	if extra > 0 {
		h.pad(extra)
	}
}

// halve merges pairs of bins, doubling their width; zero stays on a bin
// edge (a bin is added at each end first when half is odd).
func (h *histogram) halve() {
	if h.half%2 == 1 {
		h.pad(1)
	}
	merged := make([]float64, h.half)
	for i := range merged {
		merged[i] = h.counts[2*i] + h.counts[2*i+1]
	}
	h.counts, h.half, h.stride = merged, h.half/2, h.stride*2
}

// pad adds n empty bins at each end.
func (h *histogram) pad(n int) {
	c := make([]float64, 2*(h.half+n))
	copy(c[n:], h.counts)
	h.counts, h.half = c, h.half+n
}

// edge returns the value of bin edge i (0 … 2·half).
func (h *histogram) edge(i int) float64 {
	return float64(i-h.half) * h.stride
}

// percentileRange is onnxruntime's symmetric percentile calibration on a
// histogram of absolute values: the threshold t below which percentile %
// of the values lie, and the range [−t, t] clamped to the values seen.
// onnxruntime reads t at the lower edge of the bin where the cumulative
// share reaches the percentile; the upper edge is used here, so that t
// bounds that share of the values, as the percentile's definition says.
func (h *histogram) percentileRange(percentile float64) Range {
	if h.stride == 0 {
		return Range{Min: h.min, Max: h.max}
	}
	var total float64
	for _, c := range h.counts[h.half:] {
		total += c
	}
	want := percentile / 100 * total
	t := float64(h.half) * h.stride
	var cum float64
	for i, c := range h.counts[h.half:] {
		cum += c
		if cum >= want {
			t = float64(i+1) * h.stride
			break
		}
	}
	return Range{Min: max(h.min, float32(-t)), Max: min(h.max, float32(t))}
}

// entropyRange is onnxruntime's entropy (KL-divergence) calibration on a
// histogram of values: among the windows [edge(zero−i), edge(zero+i+1)],
// i from quantized/2 up to the whole histogram, it picks the one whose
// values, folded into `quantized` levels, lose the least information
// (smallest KL divergence from the full distribution with the values
// outside the window added to its end bins), clamped to the values seen.
func (h *histogram) entropyRange(quantized int) Range {
	if h.stride == 0 || len(h.counts) < quantized {
		return Range{Min: h.min, Max: h.max}
	}
	// The search is quadratic in the bins: a histogram that grew past
	// maxEntropyBins is coarsened first.
	for len(h.counts) > maxEntropyBins && len(h.counts)/2 >= quantized {
		h.halve()
	}
	n := len(h.counts)
	zero := n / 2
	// Prefix sums make each window's outliers O(1).
	prefix := make([]float64, n+1)
	for i, c := range h.counts {
		prefix[i+1] = prefix[i] + c
	}
	var p, q []float64
	best, bestKL := Range{Min: h.min, Max: h.max}, math.Inf(1)
	for i := quantized / 2; i <= zero; i++ {
		start, end := zero-i, min(zero+i+1, n)
		kl := foldedKL(h.counts[start:end], prefix[start], prefix[n]-prefix[end], quantized, &p, &q)
		if kl < bestKL {
			bestKL, best = kl, Range{Min: float32(h.edge(start)), Max: float32(h.edge(end))}
		}
	}
	return Range{Min: max(best.Min, h.min), Max: min(best.Max, h.max)}
}

// foldedKL is the KL divergence between a window of a histogram (with the
// counts left and right of it added to its end bins) and the same window
// folded into `quantized` levels and spread back over the bins that hold
// values (onnxruntime's get_entropy_threshold step). p and q are reused
// buffers.
func foldedKL(sliced []float64, left, right float64, quantized int, p, q *[]float64) float64 {
	*p = append((*p)[:0], sliced...)
	pp := *p
	pp[0] += left
	pp[len(pp)-1] += right
	*q = append((*q)[:0], make([]float64, len(sliced))...)
	qq := *q
	merged := len(sliced) / quantized
	if merged == 0 {
		return math.Inf(1)
	}
	for b := 0; b < quantized; b++ {
		s, e := b*merged, (b+1)*merged
		var sum, nonzero float64
		for j := s; j < e; j++ {
			sum += sliced[j]
		}
		if b == quantized-1 {
			for j := e; j < len(sliced); j++ {
				sum += sliced[j]
			}
		}
		for j := s; j < e; j++ {
			if pp[j] != 0 {
				nonzero++
			}
		}
		if nonzero > 0 {
			for j := s; j < e; j++ {
				qq[j] = sum / nonzero
			}
		}
	}
	return klDivergence(smooth(pp), smooth(qq))
}

// maxEntropyBins bounds the histogram the entropy search runs on.
const maxEntropyBins = 4096

// smooth replaces the zeros of a distribution by eps and takes the same
// mass off its non-zero entries (onnxruntime's smooth_distribution), so
// that the KL divergence is finite; nil when all entries are zero.
func smooth(p []float64) []float64 {
	const eps = 1e-4
	var zeros int
	for _, v := range p {
		if v == 0 {
			zeros++
		}
	}
	nonzeros := len(p) - zeros
	if nonzeros == 0 {
		return nil
	}
	eps1 := eps * float64(zeros) / float64(nonzeros)
	out := make([]float64, len(p))
	for i, v := range p {
		if v == 0 {
			out[i] = eps
		} else {
			out[i] = v - eps1
		}
	}
	return out
}

// klDivergence is Σ p log(p/q) of the normalised distributions (scipy's
// entropy(p, q)); +Inf when either is missing or q lacks mass where p
// has some.
func klDivergence(p, q []float64) float64 {
	if p == nil || q == nil {
		return math.Inf(1)
	}
	var sp, sq float64
	for i := range p {
		sp += p[i]
		sq += q[i]
	}
	var kl float64
	for i := range p {
		if p[i] <= 0 {
			continue
		}
		if q[i] <= 0 {
			return math.Inf(1)
		}
		pi, qi := p[i]/sp, q[i]/sq
		kl += pi * math.Log(pi/qi)
	}
	return kl
}
