package metrics

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is the JSON and text form of a Confusion's scores. Scores are nil
// (null in JSON) when undefined, e.g. when no pixel was counted.
type Report struct {
	MeanIoU       *float64      `json:"mean_iou"`
	PixelAccuracy *float64      `json:"pixel_accuracy"`
	Pixels        int64         `json:"pixels"`
	Classes       []ClassReport `json:"classes"`
}

// ClassReport is one class's IoU. IoU is null in JSON when the class never
// occurs in masks or predictions.
type ClassReport struct {
	Index int      `json:"index"`
	Name  string   `json:"name"`
	IoU   *float64 `json:"iou"`
}

// NewReport summarises m; names label the classes (missing names become
// "class N").
func NewReport(m *Confusion, names []string) Report {
	r := Report{MeanIoU: finite(m.MeanIoU()), PixelAccuracy: finite(m.PixelAccuracy()), Pixels: m.Pixels()}
	for c, v := range m.IoU() {
		cr := ClassReport{Index: c, Name: fmt.Sprintf("class %d", c)}
		if c < len(names) && names[c] != "" {
			cr.Name = names[c]
		}
		cr.IoU = finite(v)
		r.Classes = append(r.Classes, cr)
	}
	return r
}

// ClassIoU is class k's IoU, nil when it is undefined or the report has no
// class k.
func (r Report) ClassIoU(k int) *float64 {
	if k < 0 || k >= len(r.Classes) {
		return nil
	}
	return r.Classes[k].IoU
}

// finite returns &v, or nil for NaN and infinities, which JSON cannot hold.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// WriteText prints an aligned table of the scores.
func (r Report) WriteText(w io.Writer) {
	width := len("pixel acc")
	for _, c := range r.Classes {
		width = max(width, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  %s\n", width, "class", "IoU")
	fmt.Fprintf(w, "%s  %s\n", strings.Repeat("-", width), "------")
	for _, c := range r.Classes {
		fmt.Fprintf(w, "%-*s  %s\n", width, c.Name, score(c.IoU))
	}
	fmt.Fprintf(w, "%s  %s\n", strings.Repeat("-", width), "------")
	fmt.Fprintf(w, "%-*s  %s\n", width, "mean IoU", score(r.MeanIoU))
	fmt.Fprintf(w, "%-*s  %s\n", width, "pixel acc", score(r.PixelAccuracy))
}

func score(v *float64) string {
	if v == nil {
		return "  —"
	}
	return fmt.Sprintf("%.4f", *v)
}
