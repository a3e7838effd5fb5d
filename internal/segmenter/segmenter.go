// Package segmenter turns an ONNX segmentation model and a preprocessing
// description into the stages of a batched inference pipeline: decode and
// preprocess an image, run the model, and map its logits back onto the
// original image as a label map.
package segmenter

import (
	"fmt"
	"image"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/pipeline"
	"github.com/segtune/segtune/runtime"
)

// Segmenter runs one model.
type Segmenter struct {
	Session *runtime.Session
	Pre     imageio.Preprocess
	// FixedBatch is the model's static batch size, or 0 when it is dynamic.
	FixedBatch int
	// Classes is the number of output channels (0 when the model outputs
	// labels rather than logits).
	Classes int
	output  int  // index of the logits (or labels) output
	labels  bool // the model emits labels (arg-max inside the graph)
}

// Open loads the model into a session. pre is adjusted to the model's input:
// a model with a fixed input size gets images stretched to it unless pre
// already asks for that size (and a conflicting size is an error).
func Open(model []byte, pre imageio.Preprocess, opts runtime.Options) (*Segmenter, error) {
	sess, err := runtime.NewSession(model, opts)
	if err != nil {
		return nil, err
	}
	s, err := newSegmenter(sess, pre)
	if err != nil {
		sess.Close()
		return nil, err
	}
	return s, nil
}

func newSegmenter(sess *runtime.Session, pre imageio.Preprocess) (*Segmenter, error) {
	s := &Segmenter{Session: sess, Pre: pre}
	if len(sess.Inputs) != 1 {
		return nil, fmt.Errorf("segmentation models take one image input; this one takes %d", len(sess.Inputs))
	}
	in := sess.Inputs[0]
	if len(in.Shape) != 4 {
		return nil, fmt.Errorf("input %q has shape %v; want a 4-D image batch", in.Name, in.Shape)
	}
	if in.Type != "float32" {
		return nil, fmt.Errorf("input %q is %s; segtune feeds float32 images", in.Name, in.Type)
	}
	nhwc := strings.EqualFold(string(s.Pre.Layout), string(imageio.NHWC))
	hAxis, wAxis, cAxis := 2, 3, 1
	if nhwc {
		hAxis, wAxis, cAxis = 1, 2, 3
	}
	if c := in.Shape[cAxis]; c > 0 && c != imageio.Channels {
		return nil, fmt.Errorf("input %q has %d channels in the %s layout; segtune feeds RGB (3): check --layout", in.Name, c, layoutName(nhwc))
	}
	if n := in.Shape[0]; n > 0 {
		s.FixedBatch = int(n)
	}
	if h, w := in.Shape[hAxis], in.Shape[wAxis]; h > 0 && w > 0 {
		switch {
		case s.Pre.Height == 0 && s.Pre.Width == 0 && (s.Pre.Resize == "" || s.Pre.Resize == imageio.ResizeNone):
			s.Pre.Height, s.Pre.Width, s.Pre.Resize = int(h), int(w), imageio.ResizeStretch
		case (s.Pre.Resize == imageio.ResizeStretch || s.Pre.Resize == imageio.ResizeLetterbox || s.Pre.Resize == "") &&
			s.Pre.Height == int(h) && s.Pre.Width == int(w):
		default:
			return nil, fmt.Errorf("the model takes a fixed %dx%d (HxW) input; use --size %dx%d with --resize stretch or letterbox", h, w, h, w)
		}
	}
	if err := s.Pre.Validate(); err != nil {
		return nil, err
	}
	if len(sess.Outputs) == 0 {
		return nil, fmt.Errorf("the model has no outputs")
	}
	out := sess.Outputs[0]
	switch {
	case len(out.Shape) == 4 && (out.Type == "float32"):
		if c := out.Shape[1]; c > 0 {
			s.Classes = int(c)
		}
	case len(out.Shape) == 3 && (out.Type == "int64" || out.Type == "int32"):
		s.labels = true
	default:
		return nil, fmt.Errorf("output %q (%s %v) is neither [N,C,H,W] float logits nor [N,H,W] integer labels", out.Name, out.Type, out.Shape)
	}
	if err := s.checkDeclared(in); err != nil { // before any buffer is allocated
		return nil, err
	}
	return s, nil
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
	return pipeline.Stages{
		Prepare: func(path string) (pipeline.Prepared, error) {
			img, err := dec.ReadFile(path)
			if err != nil {
				return pipeline.Prepared{}, err
			}
			data, g, err := s.Pre.NewTensor(img)
			if err != nil {
				return pipeline.Prepared{}, fmt.Errorf("%s: %w", path, err)
			}
			return pipeline.Prepared{Input: data, Shape: pipeline.Shape{imageio.Channels, g.Height, g.Width}, Meta: Item{Image: img, Geometry: g}}, nil
		},
		Infer: s.infer,
		Finish: func(path string, p pipeline.Prepared, out pipeline.Output) error {
			it := p.Meta.(Item)
			labels, err := s.restore(it.Geometry, out)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			return finish(Result{Path: path, Image: it.Image, Labels: labels, Width: it.Geometry.SrcWidth, Height: it.Geometry.SrcHeight})
		},
		Estimate: s.Estimate, // checked against the memory limit before batching
	}
}

// infer runs one batch and splits the output into per-item views.
func (s *Segmenter) infer(batch []float32, n int, shape pipeline.Shape) ([]pipeline.Output, error) {
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
	dims := []int64{int64(rows), int64(shape[0]), int64(shape[1]), int64(shape[2])}
	if strings.EqualFold(string(s.Pre.Layout), string(imageio.NHWC)) {
		dims = []int64{int64(rows), int64(shape[1]), int64(shape[2]), int64(shape[0])}
	}
	outs, err := s.Session.Run(runtime.NewFloat32(dims, batch))
	if err != nil {
		return nil, err
	}
	o := outs[s.output]
	if len(o.Shape) < 3 || int(o.Shape[0]) != rows {
		return nil, fmt.Errorf("model output has shape %v for a batch of %d", o.Shape, rows)
	}
	flat := o.Float32
	if s.labels {
		flat = make([]float32, len(o.Int64))
		for i, v := range o.Int64 {
			flat[i] = float32(v)
		}
	}
	size := len(flat) / rows
	res := make([]pipeline.Output, n)
	for i := range res {
		res[i] = pipeline.Output{Data: flat[i*size : (i+1)*size : (i+1)*size], Shape: o.Shape[1:]}
	}
	return res, nil
}

// restore maps one item's output back to the original image's pixels.
func (s *Segmenter) restore(g imageio.Geometry, out pipeline.Output) ([]uint8, error) {
	h, w := int(out.Shape[len(out.Shape)-2]), int(out.Shape[len(out.Shape)-1])
	if h != g.Height || w != g.Width {
		// Models that emit logits at a lower resolution: the content region
		// scales with the output.
		g.Content = image.Rect(g.Content.Min.X*w/g.Width, g.Content.Min.Y*h/g.Height,
			g.Content.Max.X*w/g.Width, g.Content.Max.Y*h/g.Height)
		g.Width, g.Height = w, h
	}
	dst := make([]uint8, g.SrcWidth*g.SrcHeight)
	if s.labels {
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
	classes := int(out.Shape[0])
	if classes > 256 {
		return nil, fmt.Errorf("model outputs %d classes; masks hold at most 256", classes)
	}
	if err := g.RestoreLogits(out.Data, classes, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

func layoutName(nhwc bool) string {
	if nhwc {
		return "NHWC"
	}
	return "NCHW"
}
