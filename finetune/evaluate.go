package finetune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/segtune/segtune/finetune/data"
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
	// size head's output (see appendSizeHead) and validation runs on whole
	// images; nil under dense validation, which blends the class scores
	// only.
	Scores map[int][]float32
	// Loss is the mean cross entropy over the labelled pixels, unweighted;
	// NaN when the head has none (see hasValidationLoss). Under dense
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
	model, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	var sess *runtime.Session
	var seg *inference.Segmenter
	if dense != nil {
		if seg, err = inference.Open(model, ct, pre, opts); err != nil {
			return nil, err
		}
		defer seg.Close()
		if err := seg.SetDense(dense); err != nil {
			return nil, err
		}
		sess = seg.Session
	} else {
		if sess, err = runtime.NewSession(model, opts); err != nil {
			return nil, err
		}
		defer sess.Close()
	}
	loader, err := data.NewLoader(ctx, ds, data.LoaderConfig{BatchSize: 1, Preprocess: pre, Epochs: 1})
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	classes := ds.NumClasses()
	if err := ct.CheckClasses(classes, "the data set has"); err != nil {
		return nil, err
	}
	rows := max(int(ct.Batch), 1) // a fixed-batch model gets padded batches
	out0 := sess.OutputIndex(ct.Output)
	if out0 < 0 {
		return nil, fmt.Errorf("the model has no output %q", ct.Output)
	}
	ev := &Evaluation{Overall: metrics.NewConfusion(classes, ds.Ignore()), Groups: map[string]*metrics.Confusion{}}
	scoresOut := sess.OutputIndex(sizeScores)
	if scoresOut >= 0 && seg == nil {
		ev.Scores = map[int][]float32{}
	}
	withLoss := hasValidationLoss(ct)
	lossKind := ct.Kind
	if seg != nil && lossKind == contract.LogSoftmax {
		lossKind = contract.Logits // a mean of log-probabilities, renormalised by its log-sum-exp
	}
	var lossSum float64
	var lossPixels int64
	pred := []uint8{}
	target := []uint8{}
	var input, scoreBuf []float32
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
		var scores []float32
		var h, w int
		if seg != nil {
			// the class count is the data set's, checked by Argmax below
			if scores, _, err = seg.DenseScores(b.Images, b.Height, b.Width); err != nil {
				e, _ := ds.Example(b.IDs[0])
				return nil, fmt.Errorf("%s: %w", e.Image, err)
			}
			h, w = b.Height, b.Width
		} else {
			input = grow(input, rows*len(b.Images))
			copy(input, b.Images)
			clear(input[len(b.Images):])
			out, err := sess.Run(runtime.NewFloat32(ct.InputLayout.Shape(rows, b.Height, b.Width), input))
			if err != nil {
				return nil, err
			}
			if scoresOut >= 0 {
				ev.Scores[b.IDs[0]] = out[scoresOut].Float32[:len(out[scoresOut].Float32)/rows]
			}
			o := out[out0]
			if err := ct.CheckRun(o.Shape, b.Height, b.Width); err != nil {
				return nil, err
			}
			per := len(o.Float32) / rows
			if err := ct.CheckFinite(o.Float32[:per]); err != nil {
				e, _ := ds.Example(b.IDs[0])
				return nil, fmt.Errorf("%s: %w", e.Image, err)
			}
			if scores, _, h, w, err = ct.ClassScores(o.Float32[:per], o.Shape[1:], scoreBuf); err != nil {
				return nil, err
			}
			scoreBuf = scores
			if h != b.Height || w != b.Width {
				return nil, fmt.Errorf("model output is %dx%d for a %dx%d input; validation needs full-resolution scores", h, w, b.Height, b.Width)
			}
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
		one, err := metrics.ScoreImage(pred, target, classes, ds.Ignore())
		if err != nil {
			e, _ := ds.Example(b.IDs[0])
			return nil, fmt.Errorf("%s: %w", e.Mask, err)
		}
		ev.Overall.Merge(one)
		if groupOf != nil {
			if g := groupOf(b.IDs[0]); g != "" {
				if ev.Groups[g] == nil {
					ev.Groups[g] = metrics.NewConfusion(classes, ds.Ignore())
				}
				ev.Groups[g].Merge(one)
			}
		}
		loader.Recycle(b)
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
