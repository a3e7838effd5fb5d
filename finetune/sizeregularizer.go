package finetune

import (
	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune/sizehead"
	"github.com/segtune/segtune/finetune/trainer"
)

// RegularizerConfig configures the size regularizer (Config.Regularizer);
// the graph side that runs it defines it.
type RegularizerConfig = trainer.RegularizerConfig

// DefaultRegularizer is the regularizer of weight alpha with every other
// setting at its default: what `segtune finetune --alpha` alone and the
// demo run (F1 over images normalised per image, one projection an epoch,
// a bounded score).
func DefaultRegularizer(alpha float64) *RegularizerConfig {
	return &RegularizerConfig{
		Alpha: alpha, Projection: "epoch", ScoreBound: 1,
		Dual: dual.Config{
			Objective: "fbeta", Beta: 1, Normalization: dual.NormMean, Feasibility: dual.FeasBatch,
			LambdaInit: 0.01, CLambda: dual.DefaultCLambda, CMu: dual.DefaultCMu,
		},
	}
}

// AlphaDefaults are the data settings a regularizer weight implies unless
// asked otherwise: with a regularizer (alpha > 0), batches balanced
// between small and large objects and whole frames as training views, so
// that an image's size label (measured on its whole mask) is what the
// network sees; without one, shuffled batches of random crops.
func AlphaDefaults(alpha float64) (balanced, wholeFrame bool) {
	return alpha > 0, alpha > 0
}

// Names of what the regularizer adds to the training graph.
const (
	// SizeHeadPrefix marks parameters that belong to the size head, which
	// export leaves out.
	SizeHeadPrefix = sizehead.Prefix
)

// balancedOrder draws each epoch's batches with about the same number of
// examples from every size class (half S+, half S− for binary size), as
// the paper samples; the order depends only on the seed and the epoch, so
// runs stay reproducible and resumable.
func balancedOrder(classes []int, seed uint64, batch, steps int) func(epoch int) []int {
	ids := make([]int64, len(classes))
	for i := range ids {
		ids[i] = int64(i)
	}
	return func(epoch int) []int {
		s, err := dual.NewSampler(ids, classes, batch, seed^uint64(epoch+1)*0x9e3779b97f4a7c15)
		if err != nil {
			return nil
		}
		var out []int
		var buf []int64
		for range steps {
			buf = s.Next(buf)
			for _, id := range buf {
				out = append(out, int(id))
			}
		}
		return out
	}
}
