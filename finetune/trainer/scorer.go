package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
)

// Evaluation is a model's score on a data set, overall and per group of
// examples (e.g. "small" and "large" objects).
type Evaluation struct {
	Overall *metrics.Confusion
	Groups  map[string]*metrics.Confusion
	// Scores holds each example's size-head scores when the model has the
	// size head's output (see sizehead.Append) and validation runs on whole
	// images; nil under dense validation, which blends the class scores
	// only.
	Scores map[int][]float32
	// Loss is the mean cross entropy over the labelled pixels, unweighted;
	// NaN when the head has none (see HasValidationLoss). Under dense
	// validation it is the mean −log of the blended probability of the
	// true class: the softmax of the blended logits (or log-probabilities),
	// or the blended probabilities themselves.
	Loss float64
}

// Evaluate runs an inference model over every example of ds at the
// geometry pre describes (resize none: native size) and scores its labels,
// read as its contract ct says, against the masks. With dense set the
// model runs as inference.Dense says (sliding windows, test-time
// augmentation) through inference.Segmenter.DenseScores, and the labels
// and the loss come from the blended scores; otherwise it runs once per
// whole image. groupOf, if set, names the group of each example id ("" for
// none).
func Evaluate(ctx context.Context, m *onnx.Model, ct *contract.Contract, ds *data.Dataset, pre imageio.Preprocess,
	opts runtime.Options, dense *inference.Dense, groupOf func(id int) string) (*Evaluation, error) {
	vs, err := openValScorer(m, ct, pre, opts, dense)
	if err != nil {
		return nil, err
	}
	defer vs.close()
	loader, err := data.NewLoader(ctx, ds, data.LoaderConfig{BatchSize: 1, Preprocess: pre, Epochs: 1})
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	classes := ds.NumClasses()
	if err := ct.CheckClasses(classes, "the data set has"); err != nil {
		return nil, err
	}
	ev := &Evaluation{Overall: metrics.NewConfusion(classes, ds.Ignore()), Groups: map[string]*metrics.Confusion{}}
	if vs.scoresOut >= 0 && vs.seg == nil {
		ev.Scores = map[int][]float32{}
	}
	withLoss := HasValidationLoss(ct)
	lossKind := ct.Kind
	if vs.seg != nil && lossKind == contract.LogSoftmax {
		lossKind = contract.Logits // a mean of log-probabilities, renormalised by its log-sum-exp
	}
	var lossSum float64
	var lossPixels int64
	pred := []uint8{}
	target := []uint8{}
	var native nativeScratch
	for {
		b, err := loader.Next(ctx)
		if errors.Is(err, io.EOF) {
			ev.Loss = math.NaN()
			if withLoss && lossPixels > 0 {
				ev.Loss = lossSum / float64(lossPixels)
			}
			return ev, nil
		}
		if err != nil {
			return nil, err
		}
		example, _ := ds.Example(b.IDs[0])
		scores, h, w, err := vs.scores(b, example.Image, ev.Scores)
		if err != nil {
			return nil, err
		}
		pred = grow(pred, h*w)
		if err := imageio.Argmax(scores, classes, h, w, pred); err != nil {
			return nil, err
		}
		target = grow(target, h*w)
		for i, v := range b.Masks {
			target[i] = uint8(v)
		}
		if withLoss {
			s, n := crossEntropy(scores, classes, h*w, target, ds.Ignore(), lossKind)
			lossSum, lossPixels = lossSum+s, lossPixels+n
		}
		scoredPred, scoredTarget := pred, target
		if g := b.Geometries[0]; !g.Identity() {
			if scoredPred, scoredTarget, err = onImagePixels(ds, b.IDs[0], g, scores, pred, classes, vs.seg != nil, &native); err != nil {
				return nil, fmt.Errorf("%s: %w", example.Mask, err)
			}
		}
		one, err := metrics.ScoreImage(scoredPred, scoredTarget, classes, ds.Ignore())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", example.Mask, err)
		}
		ev.add(one, groupOf, b.IDs[0], classes, ds.Ignore())
		loader.Recycle(b)
	}
}

// nativeScratch holds the prediction of one example at its own size.
type nativeScratch struct{ pred []uint8 }

// onImagePixels maps one example's prediction back onto the image's own
// pixels as segment and eval do (the scores upsampled before the arg-max;
// dense inference's labels by nearest neighbour), with the example's own
// mask as the target: a model run at a scale or a fixed size then
// validates with the numbers eval gives it. The loss stays at the model's
// input size.
func onImagePixels(ds *data.Dataset, id int, g imageio.Geometry, scores []float32, pred []uint8, classes int, dense bool, sc *nativeScratch) (p, t []uint8, err error) {
	s, err := ds.Load(id)
	if err != nil {
		return nil, nil, err
	}
	if s.Width != g.SrcWidth || s.Height != g.SrcHeight {
		return nil, nil, fmt.Errorf("example is %dx%d, its geometry %dx%d", s.Width, s.Height, g.SrcWidth, g.SrcHeight)
	}
	sc.pred = grow(sc.pred, s.Width*s.Height)
	if dense {
		err = imageio.RestoreLabels(g, pred, sc.pred)
	} else {
		err = g.RestoreLogits(scores, classes, sc.pred)
	}
	if err != nil {
		return nil, nil, err
	}
	return sc.pred, s.Labels, nil
}

// add merges one example's confusion into the totals and its group's.
func (ev *Evaluation) add(one *metrics.Confusion, groupOf func(id int) string, id, classes, ignore int) {
	ev.Overall.Merge(one)
	if groupOf == nil {
		return
	}
	if g := groupOf(id); g != "" {
		if ev.Groups[g] == nil {
			ev.Groups[g] = metrics.NewConfusion(classes, ignore)
		}
		ev.Groups[g].Merge(one)
	}
}

// valScorer turns a validation example into class scores: the model run
// once on the whole image, or, with seg, through the Segmenter's tiling
// and test-time augmentation.
type valScorer struct {
	ct              *contract.Contract
	sess            *runtime.Session
	seg             *inference.Segmenter
	rows            int // a fixed-batch model gets padded batches
	out0, scoresOut int // the class scores' output, and the size head's (-1: none)
	input, scoreBuf []float32
}

func openValScorer(m *onnx.Model, ct *contract.Contract, pre imageio.Preprocess, opts runtime.Options, dense *inference.Dense) (*valScorer, error) {
	model, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	vs := &valScorer{ct: ct, rows: max(int(ct.Batch), 1)}
	if dense != nil {
		if vs.seg, err = inference.Open(model, ct, pre, opts); err != nil {
			return nil, err
		}
		vs.sess = vs.seg.Session
		if err := vs.seg.SetDense(dense); err != nil {
			vs.close()
			return nil, err
		}
	} else if vs.sess, err = runtime.NewSession(model, opts); err != nil {
		return nil, err
	}
	if vs.out0 = vs.sess.OutputIndex(ct.Output); vs.out0 < 0 {
		vs.close()
		return nil, fmt.Errorf("the model has no output %q", ct.Output)
	}
	vs.scoresOut = vs.sess.OutputIndex(sizehead.Scores)
	return vs, nil
}

func (vs *valScorer) close() {
	if vs.seg != nil {
		vs.seg.Close()
	} else {
		vs.sess.Close()
	}
}

// scores returns the class scores of the batch's one example, image, at
// h×w, and records its size-head scores in sizeScores when that is not
// nil. Errors about the image's values name it.
func (vs *valScorer) scores(b *data.Batch, image string, sizeScores map[int][]float32) (scores []float32, h, w int, err error) {
	if vs.seg != nil { // the class count is the data set's, checked by Argmax
		if scores, _, err = vs.seg.DenseScores(b.Images, b.Height, b.Width); err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", image, err)
		}
		return scores, b.Height, b.Width, nil
	}
	vs.input = grow(vs.input, vs.rows*len(b.Images))
	copy(vs.input, b.Images)
	clear(vs.input[len(b.Images):])
	out, err := vs.sess.Run(runtime.NewFloat32(vs.ct.InputLayout.Shape(vs.rows, b.Height, b.Width), vs.input))
	if err != nil {
		return nil, 0, 0, err
	}
	if sizeScores != nil && vs.scoresOut >= 0 {
		sizeScores[b.IDs[0]] = out[vs.scoresOut].Float32[:len(out[vs.scoresOut].Float32)/vs.rows]
	}
	o := out[vs.out0]
	if err := vs.ct.CheckRun(o.Shape, b.Height, b.Width); err != nil {
		return nil, 0, 0, err
	}
	per := len(o.Float32) / vs.rows
	if err := vs.ct.CheckFinite(o.Float32[:per]); err != nil {
		return nil, 0, 0, fmt.Errorf("%s: %w", image, err)
	}
	if scores, _, h, w, err = vs.ct.ClassScores(o.Float32[:per], o.Shape[1:], vs.scoreBuf); err != nil {
		return nil, 0, 0, err
	}
	vs.scoreBuf = scores
	if h != b.Height || w != b.Width {
		return nil, 0, 0, fmt.Errorf("model output is %dx%d for a %dx%d input; validation needs full-resolution scores", h, w, b.Height, b.Width)
	}
	return scores, h, w, nil
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// HasValidationLoss reports whether Evaluate can compute a cross entropy
// from the model's output: class logits, probabilities or
// log-probabilities (not a sigmoid, binary or label head).
func HasValidationLoss(ct *contract.Contract) bool {
	switch ct.Kind {
	case contract.Logits, contract.Softmax, contract.LogSoftmax:
		return !ct.Binary
	}
	return false
}

// crossEntropy adds up −log p(target) over the labelled pixels of one
// image's scores (laid out [classes, n] as kind says) and counts them.
func crossEntropy(scores []float32, classes, n int, target []uint8, ignore int, kind contract.Kind) (sum float64, pixels int64) {
	for i := 0; i < n; i++ {
		t := int(target[i])
		if t == ignore || t >= classes {
			continue
		}
		switch kind {
		case contract.Softmax:
			sum -= math.Log(max(float64(scores[t*n+i]), 1e-12))
		case contract.LogSoftmax:
			sum -= float64(scores[t*n+i])
		default: // logits: log-sum-exp minus the target's logit
			m := math.Inf(-1)
			for c := 0; c < classes; c++ {
				m = max(m, float64(scores[c*n+i]))
			}
			var e float64
			for c := 0; c < classes; c++ {
				e += math.Exp(float64(scores[c*n+i]) - m)
			}
			sum += m + math.Log(e) - float64(scores[t*n+i])
		}
		pixels++
	}
	return sum, pixels
}
