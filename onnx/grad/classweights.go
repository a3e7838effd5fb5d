package grad

import (
	"fmt"
	"math"

	"github.com/segtune/segtune/internal/listflag"
)

// ParseClassWeights parses Loss.ClassWeights from comma-separated numbers
// ("1,4.5"): each finite and not negative, at least one positive.
func ParseClassWeights(s string) ([]float64, error) {
	out, err := listflag.Floats(s)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no weights: want comma-separated numbers")
	}
	positive := false
	for _, v := range out {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("weight %v must be finite and not negative", v)
		}
		positive = positive || v > 0
	}
	if !positive {
		return nil, fmt.Errorf("every weight in %q is 0: the loss would be 0", s)
	}
	return out, nil
}
