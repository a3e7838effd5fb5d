package grad

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseClassWeights parses Loss.ClassWeights from comma-separated numbers
// ("1,4.5"): each finite and not negative, at least one positive.
func ParseClassWeights(s string) ([]float64, error) {
	var out []float64
	positive := false
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", strings.TrimSpace(f))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return nil, fmt.Errorf("weight %v must be finite and not negative", v)
		}
		positive = positive || v > 0
		out = append(out, v)
	}
	if !positive {
		return nil, fmt.Errorf("every weight in %q is 0: the loss would be 0", s)
	}
	return out, nil
}
