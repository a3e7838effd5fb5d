package metrics

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is the JSON and text form of a Confusion's scores. Scores are nil
// (null in JSON) when undefined, e.g. when no pixel was counted. The means
// are over the classes whose score is defined.
type Report struct {
	MeanIoU       *float64      `json:"mean_iou"`
	MeanDice      *float64      `json:"mean_dice"`
	MeanPrecision *float64      `json:"mean_precision"`
	MeanRecall    *float64      `json:"mean_recall"`
	PixelAccuracy *float64      `json:"pixel_accuracy"`
	Pixels        int64         `json:"pixels"`
	Classes       []ClassReport `json:"classes"`
}

// ClassReport is one class's scores. A score is null in JSON when it is
// undefined: IoU and Dice when the class occurs in neither masks nor
// predictions, precision when it is never predicted, recall when no mask
// has it. Support is the class's pixels in the masks.
type ClassReport struct {
	Index     int      `json:"index"`
	Name      string   `json:"name"`
	IoU       *float64 `json:"iou"`
	Dice      *float64 `json:"dice"`
	Precision *float64 `json:"precision"`
	Recall    *float64 `json:"recall"`
	Support   int64    `json:"support"`
}

// NewReport summarises m; names label the classes (missing names become
// "class N").
func NewReport(m *Confusion, names []string) Report {
	iou, dice, prec, rec := m.IoU(), m.Dice(), m.Precision(), m.Recall()
	r := Report{MeanIoU: finite(nanMean(iou)), MeanDice: finite(nanMean(dice)),
		MeanPrecision: finite(nanMean(prec)), MeanRecall: finite(nanMean(rec)),
		PixelAccuracy: finite(m.PixelAccuracy()), Pixels: m.Pixels()}
	support := m.Support()
	for c := range iou {
		r.Classes = append(r.Classes, ClassReport{Index: c, Name: ClassName(names, c),
			IoU: finite(iou[c]), Dice: finite(dice[c]), Precision: finite(prec[c]), Recall: finite(rec[c]),
			Support: support[c]})
	}
	return r
}

// ClassName is names[c], or "class c" when names has no (non-empty) entry.
func ClassName(names []string, c int) string {
	if c < len(names) && names[c] != "" {
		return names[c]
	}
	return fmt.Sprintf("class %d", c)
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
	rule := fmt.Sprintf("%s  ------  ------  ------  ------  ------------\n", strings.Repeat("-", width))
	fmt.Fprintf(w, "%-*s  %-6s  %-6s  %-6s  %-6s  %12s\n", width, "class", "IoU", "Dice", "prec", "recall", "support")
	fmt.Fprint(w, rule)
	for _, c := range r.Classes {
		fmt.Fprintf(w, "%-*s  %s  %s  %s  %s  %12d\n", width, c.Name, score(c.IoU), score(c.Dice), score(c.Precision), score(c.Recall), c.Support)
	}
	fmt.Fprint(w, rule)
	fmt.Fprintf(w, "%-*s  %s  %s  %s  %s  %12d\n", width, "mean", score(r.MeanIoU), score(r.MeanDice), score(r.MeanPrecision), score(r.MeanRecall), r.Pixels)
	fmt.Fprintf(w, "%-*s  %s\n", width, "pixel acc", score(r.PixelAccuracy))
}

func score(v *float64) string {
	if v == nil {
		return "  —   "
	}
	return fmt.Sprintf("%.4f", *v)
}
