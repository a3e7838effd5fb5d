package finetune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
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
	// size head's output (see appendSizeHead).
	Scores map[int][]float32
	// Loss is the mean cross entropy over the labelled pixels, unweighted;
	// NaN when the head has none (see hasValidationLoss).
	Loss float64
}

// Evaluate runs an inference model over every example of ds at the
// geometry pre describes (resize none: native size) and scores its labels,
// read as its contract ct says, against the masks. groupOf, if set, names the group of each example id
// ("" for none).
func Evaluate(ctx context.Context, m *onnx.Model, ct *contract.Contract, ds *data.Dataset, pre imageio.Preprocess,
	opts runtime.Options, groupOf func(id int) string) (*Evaluation, error) {
	model, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	sess, err := runtime.NewSession(model, opts)
	if err != nil {
		return nil, err
	}
	defer sess.Close()
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
	if scoresOut >= 0 {
		ev.Scores = map[int][]float32{}
	}
	withLoss := hasValidationLoss(ct)
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
		scores, _, h, w, err := ct.ClassScores(o.Float32[:per], o.Shape[1:], scoreBuf)
		if err != nil {
			return nil, err
		}
		scoreBuf = scores
		if h != b.Height || w != b.Width {
			return nil, fmt.Errorf("model output is %dx%d for a %dx%d input; validation needs full-resolution scores", h, w, b.Height, b.Width)
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
			s, n := crossEntropy(scores, classes, h*w, target, ds.Ignore(), ct.Kind)
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
