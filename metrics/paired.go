package metrics

import (
	"fmt"
	"iter"
	"math"

	"github.com/segtune/segtune/internal/stats"
)

// PairedPrediction is one labelled image predicted by two models: Name
// (for errors), the predicted labels A and B, and the mask's Target
// labels, all of one size.
type PairedPrediction struct {
	Name         string
	A, B, Target []uint8
}

// PairedMeanIoU compares two models image by image: each image's mean IoU
// (over the classes in its mask or either prediction, ScoreImage)
// under B minus under A, with the 95 % t interval over the images. An
// image whose every pixel is ignored is left out.
func PairedMeanIoU(images iter.Seq2[PairedPrediction, error], classes, ignore int) (stats.Interval, error) {
	var diffs []float64
	for p, err := range images {
		if err != nil {
			return stats.Interval{}, err
		}
		ia, err := imageMeanIoU(p.A, p.Target, classes, ignore)
		if err != nil {
			return stats.Interval{}, fmt.Errorf("%s: %w", p.Name, err)
		}
		ib, err := imageMeanIoU(p.B, p.Target, classes, ignore)
		if err != nil {
			return stats.Interval{}, fmt.Errorf("%s: %w", p.Name, err)
		}
		if !math.IsNaN(ia) && !math.IsNaN(ib) {
			diffs = append(diffs, ib-ia)
		}
	}
	return stats.TInterval(diffs), nil
}

// imageMeanIoU is one image's mean IoU over the classes in its mask or its
// prediction (NaN when every pixel is ignored).
func imageMeanIoU(pred, target []uint8, classes, ignore int) (float64, error) {
	m, err := ScoreImage(pred, target, classes, ignore)
	if err != nil {
		return 0, err
	}
	return m.MeanIoU(), nil
}
