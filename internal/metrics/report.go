package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// Report is the JSON and text form of a Confusion's scores.
type Report struct {
	MeanIoU       float64       `json:"mean_iou"`
	PixelAccuracy float64       `json:"pixel_accuracy"`
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
	r := Report{MeanIoU: m.MeanIoU(), PixelAccuracy: m.PixelAccuracy(), Pixels: m.Pixels()}
	for c, v := range m.IoU() {
		cr := ClassReport{Index: c, Name: fmt.Sprintf("class %d", c)}
		if c < len(names) && names[c] != "" {
			cr.Name = names[c]
		}
		if !math.IsNaN(v) {
			v := v
			cr.IoU = &v
		}
		r.Classes = append(r.Classes, cr)
	}
	return r
}

// MarshalJSON writes NaN scores as null, which JSON cannot otherwise hold.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	aux := struct {
		plain
		MeanIoU       *float64 `json:"mean_iou"`
		PixelAccuracy *float64 `json:"pixel_accuracy"`
	}{plain: plain(r), MeanIoU: finite(r.MeanIoU), PixelAccuracy: finite(r.PixelAccuracy)}
	return json.Marshal(aux)
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// WriteText prints an aligned table of the scores.
func (r Report) WriteText(w io.Writer) {
	width := len("class")
	for _, c := range r.Classes {
		width = max(width, len(c.Name))
	}
	fmt.Fprintf(w, "%-*s  %s\n", width, "class", "IoU")
	fmt.Fprintf(w, "%s  %s\n", strings.Repeat("-", width), "------")
	for _, c := range r.Classes {
		v := "  —"
		if c.IoU != nil {
			v = fmt.Sprintf("%.4f", *c.IoU)
		}
		fmt.Fprintf(w, "%-*s  %s\n", width, c.Name, v)
	}
	fmt.Fprintf(w, "%s  %s\n", strings.Repeat("-", width), "------")
	fmt.Fprintf(w, "%-*s  %.4f\n", width, "mean IoU", r.MeanIoU)
	fmt.Fprintf(w, "%-*s  %.4f\n", width, "pixel acc", r.PixelAccuracy)
}
