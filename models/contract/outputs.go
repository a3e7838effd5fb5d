package contract

import (
	"fmt"
	"math"
)

// MaxClasses is the most classes a byte label map holds.
const MaxClasses = 256

// ClassScores turns one image's output (its shape without the batch axis:
// [C,H,W] or [H,W,C] as the contract's output layout says) into label-class
// scores laid out [classes, h, w], whose per-pixel arg-max is the label:
// logits and probabilities as they are, and for sigmoid and binary heads a
// first plane holding the threshold (class 0 wins where no channel exceeds
// it; ties go to the lower class) followed by the channels. buf is reused
// when large enough.
func (c *Contract) ClassScores(out []float32, shape []int64, buf []float32) (scores []float32, classes, h, w int, err error) {
	if len(shape) != 3 {
		return nil, 0, 0, 0, fmt.Errorf("output %q: one image's output has shape %v, want 3 axes", c.Output, shape)
	}
	ch, h, w := int(shape[0]), int(shape[1]), int(shape[2])
	if c.OutputLayout == NHWC {
		h, w, ch = int(shape[0]), int(shape[1]), int(shape[2])
	}
	if ch*h*w != len(out) || ch < 1 || h < 1 || w < 1 {
		return nil, 0, 0, 0, fmt.Errorf("output %q: %d values do not make shape %v", c.Output, len(out), shape)
	}
	if err := c.checkChannels(ch); err != nil {
		return nil, 0, 0, 0, err
	}
	classes, first := ch, 0
	if c.Thresholded() {
		classes, first = ch+1, 1
	}
	plane := h * w
	if c.OutputLayout == NCHW && first == 0 {
		return out, classes, h, w, nil
	}
	if cap(buf) < classes*plane {
		buf = make([]float32, classes*plane)
	}
	scores = buf[:classes*plane]
	if first == 1 {
		th := c.ScoreThreshold()
		for i := range scores[:plane] {
			scores[i] = th
		}
	}
	dst := scores[first*plane:]
	if c.OutputLayout == NCHW {
		copy(dst, out)
		return scores, classes, h, w, nil
	}
	for p := 0; p < plane; p++ {
		row := out[p*ch : (p+1)*ch]
		for k, v := range row {
			dst[k*plane+p] = v
		}
	}
	return scores, classes, h, w, nil
}

// ScoreThreshold is the value of the threshold plane ClassScores puts
// first for sigmoid and binary heads, in the output's own terms: the
// threshold, or for a binary head's logit the logit whose sigmoid is the
// threshold.
func (c *Contract) ScoreThreshold() float32 {
	if c.Binary {
		return float32(math.Log(c.Threshold / (1 - c.Threshold)))
	}
	return float32(c.Threshold)
}

// checkChannels compares a run's channel count with the contract's.
func (c *Contract) checkChannels(ch int) error {
	if err := c.checkNormalisedChannels(ch); err != nil {
		return err
	}
	if c.Channels > 0 && ch != c.Channels {
		return &LayoutError{Msg: fmt.Sprintf("output %q has %d channels in the %s layout, the model's contract %d: its layout may be misread", c.Output, ch, c.OutputLayout, c.Channels)}
	}
	if ch+boolInt(c.Thresholded()) > MaxClasses {
		return &LayoutError{Try: other(c.OutputLayout),
			Msg: fmt.Sprintf("output %q has %d channels in the %s layout; masks hold at most %d classes", c.Output, ch, c.OutputLayout, MaxClasses)}
	}
	return nil
}

// checkNormalisedChannels refuses a Softmax or LogSoftmax over a single
// channel: its score is 1 (log: 0) whatever the input, so every pixel
// would be class 0.
func (c *Contract) checkNormalisedChannels(ch int) error {
	if ch == 1 && (c.Kind == Softmax || c.Kind == LogSoftmax) {
		return fmt.Errorf("output %q is a %s over one channel: its score is the same for every pixel whatever the image, so every pixel would be class 0; export the model's logits (no activation: read as binary) or a Sigmoid over its one channel",
			c.Output, c.Kind)
	}
	return nil
}

// CheckRun checks the output shape of a first run (batch axis included)
// against the contract and the input it was run on, and learns the channel
// count when the graph did not declare it. It names the flag that fixes a
// misread layout.
func (c *Contract) CheckRun(outShape []int64, inH, inW int) error {
	if c.Kind == Labels {
		if len(outShape) != 3 && !(len(outShape) == 4 && (outShape[1] == 1 || outShape[3] == 1)) {
			return fmt.Errorf("output %q has shape %v; integer labels must be [N,H,W]", c.Output, outShape)
		}
		return nil
	}
	if len(outShape) != 4 {
		return fmt.Errorf("output %q has shape %v; want [N,C,H,W] or [N,H,W,C] scores", c.Output, outShape)
	}
	ch, h, w := outShape[1], outShape[2], outShape[3]
	if c.OutputLayout == NHWC {
		h, w, ch = outShape[1], outShape[2], outShape[3]
	}
	if err := c.checkChannels(int(ch)); err != nil {
		return err
	}
	// Spatial axes scale with the input; a class axis that does instead
	// is a misread layout.
	if inH > 0 && inW > 0 && !spatial(h, w, inH, inW) {
		return &LayoutError{Try: other(c.OutputLayout),
			Msg: fmt.Sprintf("output %q has shape %v for a %dx%d input: read as %s its spatial size is %dx%d, which does not follow the input's", c.Output, outShape, inH, inW, c.OutputLayout, h, w)}
	}
	if c.Channels == 0 {
		c.SetChannels(int(ch))
	}
	return nil
}

// spatial reports whether h×w is the input's size or the input's size at
// one output stride (rounded either way, or DeepLab's 8k+1), on both axes.
func spatial(h, w int64, inH, inW int) bool {
	fits := func(in int, out, s int64) bool {
		q := (int64(in) + s - 1) / s
		return out == q || out == int64(in)/s || out == q+1
	}
	for _, s := range []int64{1, 4, 8, 16, 32} {
		if fits(inH, h, s) && fits(inW, w, s) {
			return true
		}
	}
	return false
}

// CheckClasses compares the model's label classes with the number a data
// set or a report expects; what completes "the model predicts K classes,
// WHAT N", e.g. "the data set has".
func (c *Contract) CheckClasses(n int, what string) error {
	if c.Classes == 0 || n == 0 || c.Classes == n {
		return nil
	}
	extra := ""
	switch {
	case c.Binary:
		extra = " (one logit channel read as binary: background 0, foreground 1)"
	case c.Kind == Sigmoid:
		extra = fmt.Sprintf(" (%d sigmoid channels plus background 0)", c.Channels)
	}
	return fmt.Errorf("the model predicts %d classes%s, %s %d", c.Classes, extra, what, n)
}

func other(l Layout) Layout {
	if l == NHWC {
		return NCHW
	}
	return NHWC
}

func lower(l Layout) string {
	if l == NHWC {
		return "nhwc"
	}
	return "nchw"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NonFiniteError reports model scores that are NaN or infinite: an arg-max
// over them would label every such pixel class 0, silently.
type NonFiniteError struct {
	Output   string
	NaN, Inf int
	Total    int
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("output %q holds non-finite scores (%d NaN, %d ±Inf of %d values): the model's numbers are broken for this input",
		e.Output, e.NaN, e.Inf, e.Total)
}

// CheckFinite returns a *NonFiniteError when scores (a batch's output, or
// part of it) hold NaN or ±Inf: one pass, no allocation.
func (c *Contract) CheckFinite(scores []float32) error {
	bad := 0
	for _, v := range scores {
		if v-v != 0 { // NaN or ±Inf
			bad++
		}
	}
	if bad == 0 {
		return nil
	}
	nan := 0
	for _, v := range scores {
		if v != v {
			nan++
		}
	}
	return &NonFiniteError{Output: c.Output, NaN: nan, Inf: bad - nan, Total: len(scores)}
}
