// Package inference segments images with an ONNX model: a Segmenter
// turns the model and its preprocessing into the stages of a batched
// pipeline (package inference/pipeline runs them concurrently over
// folders or streamed listings): decode and preprocess an image, run the
// model, and map its scores back onto the original image as a label map.
// segment, eval, finetune's validation, export's check and the demo all
// segment through it.
package inference

import (
	"errors"
	"fmt"
	"image"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/runtime"
)

// Segmenter runs one model.
type Segmenter struct {
	Session  *runtime.Session
	Pre      imageio.Preprocess
	Contract *contract.Contract
	// FixedBatch is the model's static batch size, or 0 when it is dynamic.
	FixedBatch int
	// Name names the model in errors (e.g. its path); "" reads "the model".
	Name   string
	output int // index of the scores (or labels) output
	// graphLabels: the session runs labelGraph's model (OpenLabels), whose
	// outputs are the arg-max labels (output), a non-finite flag per image
	// and the scores' shape.
	graphLabels           bool
	nonFinite, scoreShape int
	// inputs holds input tensors inference is done with, for the next
	// images: a fresh one, 2 MB of new pages for a 480×360 image,
	// took about half of the preprocessing's CPU time, on a prepare worker
	// competing with ONNX Runtime for the cores.
	inputs buffers
	// scores holds score buffers whose images are finished
	// (pipeline.Output.Release), and lastScores the scores' shape the
	// last run gave and its input's dims: a run on the same dims has ONNX
	// Runtime write the scores straight into a pooled buffer (RunInto)
	// instead of into memory of its own that Run then copies into Go
	// twice, 8 MB of fresh pages each for a 1024² two-class map. One
	// shape is kept, so that images of ever new sizes hold nothing.
	scores     buffers
	scoresHeld atomic.Int64 // pooled score buffers with outputs not all released
	lastScores struct {
		sync.Mutex
		dims  [4]int64
		shape []int64 // nil: not known
	}
	dense *Dense // sliding-window / TTA inference, when set (SetDense)
	// modelDigest is the SHA-256 of the model's bytes (MaskIdentity).
	modelDigest []byte
}

// Open loads the model into a session and checks its contract ct (see
// package contract) before any image is read: pre gets the contract's
// input layout unless it names one, and a model with a fixed input size
// gets images stretched to it unless pre already asks for that size (a
// conflicting size is an error). A first run on a blank image checks the
// output's layout and class count, so that a misread model fails once,
// here, rather than on every image.
func Open(model []byte, ct *contract.Contract, pre imageio.Preprocess, opts runtime.Options) (*Segmenter, error) {
	sess, err := runtime.NewSession(model, opts)
	if err != nil {
		return nil, err
	}
	s, err := newSegmenter(sess, ct, pre)
	if err != nil {
		sess.Close()
		return nil, err
	}
	s.modelDigest = digest(model)
	return s, nil
}

// OpenLabels is Open for callers that need only each image's label map
// (segment without tiling or TTA): where the arg-max inside the graph gives
// exactly the labels the host's gives, the session runs the model with it
// appended (labelGraph), so that one byte a pixel comes back instead of the
// 4·C bytes of float scores and no host pass goes over the scores. That
// holds where the tensor is the image at its own size (no resize: the host
// would interpolate the scores to the image before its arg-max) and the
// scores have the input's size; elsewhere (and for models that output
// labels) OpenLabels is Open. A segmenter opened so refuses tiling and TTA
// (SetDense) and DenseScores: they need the scores.
func OpenLabels(model []byte, ct *contract.Contract, pre imageio.Preprocess, opts runtime.Options) (*Segmenter, error) {
	if !nativeSize(ct, pre) {
		return Open(model, ct, pre, opts)
	}
	lg, err := labelGraph(model, ct)
	if errors.Is(err, errNoLabelGraph) {
		return Open(model, ct, pre, opts)
	}
	if err != nil {
		return nil, err
	}
	sess, err := runtime.NewSession(lg, opts)
	if err != nil {
		return nil, err
	}
	s, err := newSegmenterFor(sess, ct, pre, true)
	if err != nil {
		sess.Close()
		if errors.Is(err, errNoLabelGraph) { // scores at a lower resolution
			return Open(model, ct, pre, opts)
		}
		return nil, err
	}
	s.modelDigest = digest(model)
	return s, nil
}

// nativeSize reports whether pre (for a model of contract ct) gives every
// image a tensor that is the image itself: no fixed input size, and for
// two sizes no multiple-of, scale or resize would leave alone, the
// identity geometry.
func nativeSize(ct *contract.Contract, pre imageio.Preprocess) bool {
	if ct.Height > 0 && ct.Width > 0 {
		return false
	}
	for _, size := range [][2]int{{97, 61}, {64, 48}} {
		g, err := pre.Geometry(size[0], size[1])
		if err != nil || !g.Identity() {
			return false
		}
	}
	return true
}

func newSegmenter(sess *runtime.Session, ct *contract.Contract, pre imageio.Preprocess) (*Segmenter, error) {
	return newSegmenterFor(sess, ct, pre, false)
}

// newSegmenterFor is newSegmenter for a session on the model itself or,
// with graphLabels, on its labelGraph.
func newSegmenterFor(sess *runtime.Session, ct *contract.Contract, pre imageio.Preprocess, labelsOnly bool) (*Segmenter, error) {
	s := &Segmenter{Session: sess, Pre: pre, Contract: ct, graphLabels: labelsOnly}
	if s.Pre.Layout == "" {
		s.Pre.Layout = imageio.Layout(ct.InputLayout)
	}
	s.FixedBatch = int(ct.Batch)
	if h, w := ct.Height, ct.Width; h > 0 && w > 0 {
		switch {
		case s.Pre.Height == 0 && s.Pre.Width == 0 && (s.Pre.Resize == "" || s.Pre.Resize == imageio.ResizeNone):
			s.Pre.Height, s.Pre.Width, s.Pre.Resize = int(h), int(w), imageio.ResizeStretch
		case (s.Pre.Resize == imageio.ResizeStretch || s.Pre.Resize == imageio.ResizeLetterbox || s.Pre.Resize == "") &&
			s.Pre.Height == int(h) && s.Pre.Width == int(w):
		default:
			return nil, &FixedSizeError{Height: int(h), Width: int(w)}
		}
	}
	if err := s.Pre.Validate(); err != nil {
		return nil, err
	}
	s.output = sess.OutputIndex(ct.Output)
	if labelsOnly {
		s.output, s.nonFinite, s.scoreShape = sess.OutputIndex(graphLabels), sess.OutputIndex(graphNonFinite), sess.OutputIndex(graphScoreShape)
	}
	if s.output < 0 || s.nonFinite < 0 || s.scoreShape < 0 {
		return nil, fmt.Errorf("the session has no output %q", ct.Output)
	}
	if err := s.checkDeclared(sess.Inputs[0]); err != nil { // before any buffer is allocated
		return nil, err
	}
	if err := s.probe(); err != nil {
		return nil, err
	}
	return s, nil
}

// probe runs the model once on a blank image at the size the
// preprocessing gives (64×64 where it keeps images' native sizes) and
// checks the output against the contract. A model that cannot run at
// that size is checked on its first real batch instead.
func (s *Segmenter) probe() error {
	h, w := s.Pre.Height, s.Pre.Width
	if h == 0 || w == 0 {
		h, w = 64, 64
	}
	dims := s.inputLayout().Shape(max(s.FixedBatch, 1), h, w)
	blank := make([]float32, int(dims[0])*imageio.Channels*h*w)
	outs, pooled, err := s.runScores(dims, blank)
	if err != nil {
		if s.graphLabels { // the scores' size is not known: keep them
			return errNoLabelGraph
		}
		return nil
	}
	if dims[0] == 1 { // the first image's tensor
		s.Recycle(blank)
	}
	if !s.graphLabels {
		if o := outs[s.output]; !pooled && s.knownScoreShape(dims) != nil {
			// The first batch's scores go into this run's copy.
			s.scores.put(o.Float32)
		}
		return s.Contract.CheckRun(outs[s.output].Shape, h, w)
	}
	shape := outs[s.scoreShape].Int64
	if err := s.Contract.CheckRun(shape, h, w); err != nil {
		return err
	}
	if !s.inputSized(shape, h, w) {
		return errNoLabelGraph
	}
	return nil
}

// inputSized reports whether scores of shape (NCHW or NHWC as the
// contract says) have the input's h×w.
func (s *Segmenter) inputSized(shape []int64, h, w int) bool {
	sh, sw := shape[2], shape[3]
	if s.Contract.OutputLayout == contract.NHWC {
		sh, sw = shape[1], shape[2]
	}
	return sh == int64(h) && sw == int64(w)
}

// inputLayout is the layout images are fed in (the preprocessing's).
func (s *Segmenter) inputLayout() contract.Layout {
	return contract.Layout(strings.ToUpper(string(s.Pre.Layout)))
}

// BatchFor is n images per model run limited to the model's fixed batch
// size, and at least 1.
func (s *Segmenter) BatchFor(n int) int {
	n = max(n, 1)
	if s.FixedBatch > 0 {
		n = min(n, s.FixedBatch)
	}
	return n
}

// FitBatch is BatchFor(n), noted on notes when the model's fixed batch
// size lowers it (the setting batch called name(key)).
func (s *Segmenter) FitBatch(n int, notes io.Writer, name func(key string) string) int {
	b := s.BatchFor(n)
	if b < n {
		fmt.Fprintln(notes, setting.Sprintf(name, "segtune: the model's batch size is fixed at %d; using {batch} %d", b, b))
	}
	return b
}

// FixedSizeError reports preprocessing at another size than the fixed
// input size the model takes; its advice names the settings size and
// resize.
type FixedSizeError struct{ Height, Width int }

func (e *FixedSizeError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *FixedSizeError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "the model takes a fixed %dx%d (HxW) input; use {size} %dx%d with {resize} stretch or letterbox", e.Height, e.Width, e.Height, e.Width)
}

// PaletteError is a palette with fewer colours than the model (Model:
// the Segmenter's Name) has classes.
type PaletteError struct {
	Model            string
	Classes, Colours int
}

func (e *PaletteError) Error() string {
	model := e.Model
	if model == "" {
		model = "the model"
	}
	return fmt.Sprintf("%s predicts %d classes; the palette has %d colours", model, e.Classes, e.Colours)
}

// CheckPalette refuses (with a *PaletteError) a palette with fewer colours
// than the model has classes; nil, the default palette, is accepted.
func (s *Segmenter) CheckPalette(pal imageio.Palette) error {
	if n := s.Contract.Classes; n > len(pal) && len(pal) > 0 {
		return &PaletteError{Model: s.Name, Classes: n, Colours: len(pal)}
	}
	return nil
}

// Close releases the session.
func (s *Segmenter) Close() error { return s.Session.Close() }

// Item travels from Prepare to Finish: the decoded image and how it maps into
// the model's input.
type Item struct {
	Image    image.Image
	Geometry imageio.Geometry
}

// Result is the per-image outcome handed to the finish callback: a label map
// the size of the original image.
type Result struct {
	Path   string
	Image  image.Image
	Labels []uint8
	Width  int
	Height int
}

// Stages returns pipeline stages that call finish with each image's labels.
func (s *Segmenter) Stages(dec imageio.Decoder, finish func(Result) error) pipeline.Stages {
	return s.StagesFrom(dec.ReadFile, finish)
}

// StagesFrom is Stages with images read by read (e.g. from object
// storage) instead of from local files.
func (s *Segmenter) StagesFrom(read func(path string) (image.Image, error), finish func(Result) error) pipeline.Stages {
	return pipeline.Stages{
		Prepare: func(path string) (pipeline.Prepared, error) {
			img, err := read(path)
			if err != nil {
				return pipeline.Prepared{}, err
			}
			p, err := s.Prepare(img)
			if err != nil {
				return pipeline.Prepared{}, fmt.Errorf("%s: %w", path, err)
			}
			return p, nil
		},
		Infer:      s.Infer,
		InferItems: s.inferItems(),
		Recycle:    s.Recycle,
		Finish: func(path string, p pipeline.Prepared, out pipeline.Output) error {
			labels, err := s.Labels(p, out)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			it := p.Meta.(Item)
			return finish(Result{Path: path, Image: it.Image, Labels: labels, Width: it.Geometry.SrcWidth, Height: it.Geometry.SrcHeight})
		},
		Estimate: s.RunEstimate, // checked against the memory limit before batching
	}
}

// Prepare preprocesses a decoded image into an item for Infer; its Meta
// is an Item. With tiled windows at the image's own size, the item holds
// no tensor: each window is preprocessed from the image when it runs.
func (s *Segmenter) Prepare(img image.Image) (pipeline.Prepared, error) {
	if s.windowsFromImage() {
		b := img.Bounds()
		g, err := s.Pre.Geometry(b.Dx(), b.Dy())
		if err != nil {
			return pipeline.Prepared{}, err
		}
		if g.Identity() { // no tensor of the whole image
			return pipeline.Prepared{Shape: pipeline.Shape{imageio.Channels, g.Height, g.Width}, Meta: Item{Image: img, Geometry: g}}, nil
		}
	}
	data, g, err := s.tensor(img)
	if err != nil {
		return pipeline.Prepared{}, err
	}
	return pipeline.Prepared{Input: data, Shape: pipeline.Shape{imageio.Channels, g.Height, g.Width}, Meta: Item{Image: img, Geometry: g}}, nil
}

// Recycle takes back an item's input once inference is done with it.
func (s *Segmenter) Recycle(in []float32) {
	if in != nil {
		s.inputs.put(in)
	}
}

// Labels maps the output of an item made by Prepare back onto its
// image: a label map of the image's size.
func (s *Segmenter) Labels(p pipeline.Prepared, out pipeline.Output) ([]uint8, error) {
	return s.restore(p.Meta.(Item).Geometry, out)
}

// RunEstimate is Estimate, or its dense counterpart when tiling: what
// segment checks before batching images of shape, and serve charges to
// each request before running it.
func (s *Segmenter) RunEstimate(n int, shape pipeline.Shape) int64 {
	if s.dense != nil {
		return s.denseEstimate(n, shape)
	}
	return s.Estimate(n, shape)
}

// Infer runs one batch of n items and splits the output into per-item
// views (see pipeline.Stages.Infer).
func (s *Segmenter) Infer(batch []float32, n int, shape pipeline.Shape) (_ []pipeline.Output, err error) {
	per := shape[0] * shape[1] * shape[2]
	rows := n
	if s.FixedBatch > 0 {
		if n > s.FixedBatch {
			return nil, fmt.Errorf("batch of %d exceeds the model's fixed batch size %d", n, s.FixedBatch)
		}
		if n < s.FixedBatch { // pad with blank images
			batch = append(batch, make([]float32, (s.FixedBatch-n)*per)...)
			rows = s.FixedBatch
		}
	}
	dims := s.inputLayout().Shape(rows, shape[1], shape[2])
	outs, pooled, err := s.runScores(dims, batch)
	if err != nil {
		return nil, err
	}
	if s.graphLabels {
		return s.graphOutputs(outs, n, rows, shape[1], shape[2])
	}
	o := outs[s.output]
	if pooled { // from here on, a failed batch gives its buffer back
		defer func() {
			if err != nil {
				s.scores.put(o.Float32)
			}
		}()
	}
	if len(o.Shape) < 3 || int(o.Shape[0]) != rows {
		return nil, fmt.Errorf("model output has shape %v for a batch of %d", o.Shape, rows)
	}
	if err = s.Contract.CheckRun(o.Shape, shape[1], shape[2]); err != nil {
		return nil, err
	}
	flat := o.Float32
	if s.Contract.Kind == contract.Labels {
		flat = make([]float32, len(o.Int64))
		for i, v := range o.Int64 {
			flat[i] = float32(v)
		}
	}
	size := len(flat) / rows
	if s.Contract.Kind != contract.Labels {
		// The batch's own rows, not the blank padding: a failed batch is
		// retried image by image, which names the image.
		if err = s.Contract.CheckFinite(flat[:n*size]); err != nil {
			return nil, err
		}
	}
	var release func()
	if pooled {
		release = s.releaser(o.Float32, n)
	}
	res := make([]pipeline.Output, n)
	for i := range res {
		res[i] = pipeline.Output{Data: flat[i*size : (i+1)*size : (i+1)*size], Shape: o.Shape[1:], Release: release}
	}
	return res, nil
}

// runScores runs the model on one batch of dims. Where a run on the same
// dims gave float scores before, ONNX Runtime writes them into a pooled
// buffer of that shape (pooled); a run that then fails (a model whose
// output's shape changed) is run again as a plain Run, which learns the
// shape anew. A label graph's outputs are small and always Run's.
func (s *Segmenter) runScores(dims []int64, batch []float32) (outs []*runtime.Tensor, pooled bool, err error) {
	in := runtime.NewFloat32(dims, batch)
	if s.graphLabels {
		outs, err := s.Session.Run(in)
		return outs, false, err
	}
	if shape := s.knownScoreShape(dims); shape != nil {
		buf := s.scores.get((&runtime.Tensor{Shape: shape}).Len())
		given := make([]*runtime.Tensor, s.output+1)
		given[s.output] = runtime.NewFloat32(shape, buf)
		if outs, err := s.Session.RunInto(given, in); err == nil {
			return outs, true, nil
		}
		s.learnScoreShape(dims, nil)
		s.scores.put(buf)
	}
	outs, err = s.Session.Run(in)
	if err != nil {
		return nil, false, err
	}
	if o := outs[s.output]; o.Float32 != nil && s.Contract.Kind != contract.Labels {
		s.learnScoreShape(dims, o.Shape)
	}
	return outs, false, nil
}

// knownScoreShape is the scores' shape of a run on dims, when known (a copy).
func (s *Segmenter) knownScoreShape(dims []int64) []int64 {
	s.lastScores.Lock()
	defer s.lastScores.Unlock()
	if s.lastScores.shape == nil || s.lastScores.dims != [4]int64(dims) {
		return nil
	}
	return slices.Clone(s.lastScores.shape)
}

// learnScoreShape remembers shape (nil: none) as the scores' shape of runs
// on dims.
func (s *Segmenter) learnScoreShape(dims, shape []int64) {
	s.lastScores.Lock()
	defer s.lastScores.Unlock()
	s.lastScores.dims, s.lastScores.shape = [4]int64(dims), slices.Clone(shape)
}

// releaser is the Release of the n outputs that share buf: the last of
// them to be released gives buf back to the pool.
func (s *Segmenter) releaser(buf []float32, n int) func() {
	var left atomic.Int32
	left.Store(int32(n))
	s.scoresHeld.Add(1)
	return func() {
		if left.Add(-1) == 0 {
			s.scoresHeld.Add(-1)
			s.scores.put(buf)
		}
	}
}

// ScoresHeld is how many pooled score buffers are out: handed to outputs
// (pipeline.Output.Release) not all released yet. Once every output is
// done with it is 0; a caller that forgets Release leaves it above, and
// each later image then allocates a fresh buffer.
func (s *Segmenter) ScoresHeld() int { return int(s.scoresHeld.Load()) }

// graphOutputs splits a label graph's outputs for a batch of n images (rows
// with the padding) of h×w into per-item label maps (Output.Meta), after
// the checks Infer makes of scores: the scores' shape, and no NaN or ±Inf
// in the batch's own rows.
func (s *Segmenter) graphOutputs(outs []*runtime.Tensor, n, rows, h, w int) ([]pipeline.Output, error) {
	shape := outs[s.scoreShape].Int64
	if len(shape) != 4 || int(shape[0]) != rows {
		return nil, fmt.Errorf("model output has shape %v for a batch of %d", shape, rows)
	}
	if err := s.Contract.CheckRun(shape, h, w); err != nil {
		return nil, err
	}
	if !s.inputSized(shape, h, w) {
		return nil, fmt.Errorf("output %q has shape %v for a %dx%d input: the arg-max inside the graph needs scores at the input's size", s.Contract.Output, shape, h, w)
	}
	flags := outs[s.nonFinite].Float32
	if len(flags) != rows {
		return nil, fmt.Errorf("the non-finite flags hold %d values for a batch of %d", len(flags), rows)
	}
	for i, v := range flags[:n] {
		if v != v {
			return nil, fmt.Errorf("output %q holds non-finite scores (NaN or ±Inf) for image %d of the batch: the model's numbers are broken for this input", s.Contract.Output, i+1)
		}
	}
	labels := outs[s.output].Uint8
	if len(labels) != rows*h*w {
		return nil, fmt.Errorf("the label output holds %d values for a batch of %d %dx%d images", len(labels), rows, h, w)
	}
	res := make([]pipeline.Output, n)
	for i := range res {
		res[i] = pipeline.Output{Shape: []int64{int64(h), int64(w)}, Meta: labels[i*h*w : (i+1)*h*w : (i+1)*h*w]}
	}
	return res, nil
}

// tensor preprocesses img into an input tensor, reusing one inference is
// done with when it is large enough.
func (s *Segmenter) tensor(img image.Image) ([]float32, imageio.Geometry, error) {
	b := img.Bounds()
	g, err := s.Pre.Geometry(b.Dx(), b.Dy())
	if err != nil {
		return nil, g, err
	}
	buf := s.inputs.get(g.Len())
	if g, err = s.Pre.Tensor(img, buf); err != nil {
		return nil, g, err
	}
	return buf, g, nil
}

// restore maps one item's output back to the original image's pixels.
func (s *Segmenter) restore(g imageio.Geometry, out pipeline.Output) ([]uint8, error) {
	labels, dense := out.Meta.([]uint8) // dense inference's or the graph's, at the tensor's size
	if dense && g.Identity() {
		return labels, nil
	}
	if s.graphLabels { // OpenLabels keeps the scores where this could happen
		return nil, fmt.Errorf("the model's labels come from its graph, but the %dx%d image was resized to %dx%d: only scores can be restored", g.SrcWidth, g.SrcHeight, g.Width, g.Height)
	}
	dst := make([]uint8, g.SrcWidth*g.SrcHeight)
	if dense {
		if err := imageio.RestoreLabels(g, labels, dst); err != nil {
			return nil, err
		}
		return dst, nil
	}
	if s.Contract.Kind == contract.Labels {
		h, w := int(out.Shape[len(out.Shape)-2]), int(out.Shape[len(out.Shape)-1])
		if len(out.Shape) == 3 && out.Shape[2] == 1 { // [H,W,1]
			h, w = int(out.Shape[0]), int(out.Shape[1])
		}
		g = scaleContent(g, h, w)
		labels := make([]uint8, len(out.Data))
		for i, v := range out.Data {
			if v < 0 || v > 255 {
				return nil, fmt.Errorf("model output label %v does not fit a mask", v)
			}
			labels[i] = uint8(v)
		}
		if err := imageio.RestoreLabels(g, labels, dst); err != nil {
			return nil, err
		}
		return dst, nil
	}
	scores, classes, h, w, err := s.Contract.ClassScores(out.Data, out.Shape, nil)
	if err != nil {
		return nil, err
	}
	if err := scaleContent(g, h, w).RestoreLogits(scores, classes, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// scaleContent adapts g to an output of h×w: models that emit scores at a
// lower resolution have the content region scale with the output.
func scaleContent(g imageio.Geometry, h, w int) imageio.Geometry {
	if h != g.Height || w != g.Width {
		g.Content = image.Rect(g.Content.Min.X*w/g.Width, g.Content.Min.Y*h/g.Height,
			g.Content.Max.X*w/g.Width, g.Content.Max.Y*h/g.Height)
		g.Width, g.Height = w, h
	}
	return g
}

// LabelsInGraph reports whether the session runs the model with its
// arg-max appended (OpenLabels), label maps coming back instead of scores.
func (s *Segmenter) LabelsInGraph() bool { return s.graphLabels }

// InFlight is how many batches the pipeline should run at once
// (pipeline.Config.InFlight): two on a GPU, where one batch's copies and
// host-side checks then overlap the other's kernels; one on the CPU, where
// a run already takes every core. Infer is safe for concurrent use once
// the contract knows its channel count (the probe at Open learns it;
// CheckRun would otherwise set it on the first runs).
func (s *Segmenter) InFlight() int {
	if s.Session.Device == runtime.DeviceCUDA && (s.Contract.Channels > 0 || s.Contract.Kind == contract.Labels) {
		return 2
	}
	return 1
}
