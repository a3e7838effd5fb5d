package smnist

import (
	"fmt"
	"strings"
)

// Table renders runs as a Markdown table: final test accuracy, mean and
// standard deviation over the last 10 epochs, the two halves of the test
// set, the size predictor's test F1, projections and wall time.
func Table(runs []*Results) string {
	var b strings.Builder
	b.WriteString("| run | head | epochs | final test acc | mean ± std, last 10 epochs | acc original / doubled | size F1 (test) | projections | wall time (s) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		last := r.Epochs[len(r.Epochs)-1]
		fmt.Fprintf(&b, "| %s | %s | %d | %.4f | %.4f ± %.4f | %.4f / %.4f | %.3f | %d | %.1f |\n",
			r.Config.Name, r.Config.Head, len(r.Epochs), r.FinalAcc, r.MeanLast, r.StdLast,
			last.TestAccOriginal, last.TestAccDoubled, r.SizeF1Test, r.Projections, r.WallS)
	}
	return b.String()
}
