package evaluate

import (
	"fmt"
	"io"
	"sort"

	"github.com/segtune/segtune/inference/report"
	"github.com/segtune/segtune/metrics"
)

// Summary is an evaluation's report: the same for one run and for the
// merged shards of a job, so both print exactly alike.
type Summary struct {
	metrics.Report
	// Groups holds the scores of images with small and large objects.
	Groups map[string]metrics.Report `json:"groups,omitempty"`
	// SizeGap is large − small mean IoU.
	SizeGap   *float64  `json:"size_gap,omitempty"`
	Threshold float64   `json:"size_threshold,omitempty"`
	Images    int       `json:"images"`
	Failed    int       `json:"failed"`
	Failures  []Failure `json:"failures"`
	Seconds   float64   `json:"seconds"`
	Device    string    `json:"device"`
	// Confusion is the pixel counts by true class (rows) and predicted
	// class (columns).
	Confusion [][]int64 `json:"confusion"`

	// Matrix and ClassNames are Confusion and the class names, for the
	// text report and the confusion files.
	Matrix     *metrics.Confusion `json:"-"`
	ClassNames []string           `json:"-"`
}

// Summary is p's report, failures sorted by path.
func (p *Partial) Summary() Summary {
	names := p.Setup.ClassNames
	failures := append([]Failure{}, p.Failures...)
	sort.SliceStable(failures, func(i, j int) bool { return failures[i].Path < failures[j].Path })
	m := p.Matrix()
	sum := Summary{Report: metrics.NewReport(m, names), Images: p.Images,
		Failed: len(failures), Failures: failures, Seconds: p.Seconds, Device: p.Device,
		Confusion: m.Rows(), Matrix: m, ClassNames: names}
	small, large, threshold, ok := p.SizeGroups()
	if !ok {
		return sum
	}
	sum.Groups = map[string]metrics.Report{"small": metrics.NewReport(small, names), "large": metrics.NewReport(large, names)}
	if s, l := sum.Groups["small"].MeanIoU, sum.Groups["large"].MeanIoU; s != nil && l != nil {
		g := *l - *s
		sum.SizeGap = &g
	}
	sum.Threshold = threshold
	return sum
}

// Score scores one image's predicted labels against its mask's, as the
// run says (classes, ignore label, size classes): its confusion matrix and
// its object size, for Add.
func (r Setup) Score(pred, target []uint8) (*metrics.Confusion, float64, error) {
	conf, err := metrics.ScoreImage(pred, target, r.Classes, r.Ignore)
	if err != nil {
		return nil, 0, err
	}
	if len(r.SizeClasses) == 0 {
		return conf, 0, nil
	}
	return conf, metrics.MaskObjectFraction(target, r.Ignore, r.SizeClasses), nil
}

// WriteText writes the report as `segtune eval` prints it: the scores by
// class and their means, the confusion matrix, the scores of images with
// small and large objects, and the images scored.
func (s Summary) WriteText(w io.Writer) {
	s.Report.WriteText(w)
	fmt.Fprintln(w)
	metrics.WriteConfusionText(w, s.Matrix, s.ClassNames)
	fmt.Fprintln(w)
	for _, g := range []string{"small", "large"} {
		if r, ok := s.Groups[g]; ok && r.MeanIoU != nil {
			fmt.Fprintf(w, "%-9s  %.4f  (mean IoU of images with %s objects, size threshold %.4g)\n", g, *r.MeanIoU, g, s.Threshold)
		}
	}
	if s.SizeGap != nil {
		fmt.Fprintf(w, "%-9s  %+.4f  (large − small)\n", "size gap", *s.SizeGap)
	}
	fmt.Fprintf(w, "%d images scored in %.1fs on %s\n", s.Images-s.Failed, s.Seconds, s.Device)
}

// Print prints the summary with p: an error when any image failed.
func (s Summary) Print(p report.Printer) error {
	text := func(w io.Writer) error { s.WriteText(w); return nil }
	return p.Write(s, report.Run{Images: s.Images, Failed: s.Failed, Failures: s.Failures, Text: text})
}
