package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/onnx/upgrade"
)

// Report is what `segtune export` prints and saves next to the model.
type Report struct {
	Precision   Precision `json:"precision"`
	Source      string    `json:"source"`
	Output      string    `json:"output"`
	ORTVersion  string    `json:"onnxruntime"`
	SourceBytes int       `json:"source_bytes"`
	OutputBytes int       `json:"output_bytes"`

	Quantization *quantize.Summary        `json:"quantization,omitempty"`
	Calibration  *CalibrationInfo         `json:"calibration,omitempty"`
	Float16      *quantize.Float16Summary `json:"float16,omitempty"`
	Check        *Check                   `json:"check,omitempty"`
	// Opset says how the model was raised to a newer opset, if it was.
	Opset *upgrade.Summary `json:"opset,omitempty"`
	// Notes are what the export did to the model besides its precision
	// (weights an old exporter listed as inputs, say), one line each.
	Notes []string `json:"notes,omitempty"`

	// MinAgreement is the pixel agreement the export had to reach;
	// Passed whether it did (and every other check passed).
	MinAgreement float64 `json:"min_agreement"`
	Passed       bool    `json:"passed"`
	// Problems lists why it did not pass.
	Problems []string `json:"problems,omitempty"`
}

// ReportPaths returns the JSON and text report files of a model file:
// MODEL.report.json and MODEL.report.txt, MODEL without ".onnx".
func ReportPaths(model string) (jsonPath, textPath string) {
	base := strings.TrimSuffix(model, ".onnx")
	return base + ".report.json", base + ".report.txt"
}

// Evaluate sets Passed and Problems from the check and MinAgreement.
func (r *Report) Evaluate() {
	r.Problems = nil
	if r.Check == nil {
		r.Problems = append(r.Problems, "not checked")
	} else if r.Check.PixelAgreement < r.MinAgreement {
		r.Problems = append(r.Problems, fmt.Sprintf("pixel agreement %.4f is below the minimum agreement %.4f", r.Check.PixelAgreement, r.MinAgreement))
	}
	if c := r.Check; c != nil && c.CalibrationImages != nil && *c.CalibrationImages > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("warning: %d of the %d checked images were calibrated on: the agreement overstates the agreement on new images (check on images held out from calibration)",
			*c.CalibrationImages, c.Images))
	}
	if q := r.Quantization; q != nil && q.ClippedBiasValues > 0 {
		// Not fatal, but said: a saturated bias changes the output.
		r.Problems = append(r.Problems, fmt.Sprintf("warning: %d bias values saturated the int32 range", q.ClippedBiasValues))
	}
	r.Passed = true
	for _, p := range r.Problems {
		if !strings.HasPrefix(p, "warning:") {
			r.Passed = false
		}
	}
}

// JSON encodes the report, indented.
func (r *Report) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "export %s: %s -> %s\n", r.Precision, r.Source, r.Output)
	fmt.Fprintf(w, "  size          %s -> %s (%.0f%%)\n", mib(r.SourceBytes), mib(r.OutputBytes), 100*float64(r.OutputBytes)/float64(max(r.SourceBytes, 1)))
	if r.ORTVersion != "" {
		fmt.Fprintf(w, "  ONNX Runtime  %s\n", r.ORTVersion)
	}
	if r.Opset != nil {
		fmt.Fprintf(w, "  opset         %s\n", r.Opset)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note          %s\n", n)
	}
	if q := r.Quantization; q != nil {
		ch := "per channel"
		if !q.PerChannel {
			ch = "per tensor"
		}
		fmt.Fprintf(w, "  quantization  QDQ, %s activations (asymmetric), %s weights (symmetric, %s)", q.Activations, q.Weights, ch)
		if q.ReduceRange {
			fmt.Fprintf(w, ", 7-bit weights")
		}
		fmt.Fprintf(w, "\n                %s quantized; %d QDQ pairs, %d int8 weights, %d int32 biases, %d Relu/Clip folded\n",
			counts(q.QuantizedNodes), q.QDQPairs, q.QuantizedWeights, q.Int32Biases, q.FusedActivations)
		for _, k := range q.KeptNodes {
			fmt.Fprintf(w, "                kept float: %s (%s)\n", k.Node, k.Reason)
		}
		for _, n := range q.Notes {
			fmt.Fprintf(w, "                note: %s\n", n)
		}
	}
	if c := r.Calibration; c != nil {
		fmt.Fprintf(w, "  calibration   %s", c.Method)
		if c.Percentile > 0 {
			fmt.Fprintf(w, " (%g%%)", c.Percentile)
		}
		fmt.Fprintf(w, " on %d images, %d tensors", c.Images, c.Tensors)
		if c.Passes > 1 {
			fmt.Fprintf(w, " (%d runs per image to fit in memory)", c.Passes)
		}
		fmt.Fprintf(w, ", %.1fs\n", c.Seconds)
	}
	if f := r.Float16; f != nil {
		fmt.Fprintf(w, "  float16       %s in float16; %d float16 initializers, %d Casts", counts(f.Float16Nodes), f.Initializers, f.Casts)
		if f.Saturated > 0 {
			fmt.Fprintf(w, ", %d values saturated to ±65504", f.Saturated)
		}
		fmt.Fprintln(w)
		kept := map[string]int{}
		for _, k := range f.Float32Nodes {
			kept[k.Op]++
		}
		if len(kept) > 0 {
			fmt.Fprintf(w, "                kept float32: %s\n", counts(kept))
		}
	}
	if c := r.Check; c != nil {
		if k := c.Kernels; k != nil {
			switch {
			case k.Error != "":
				fmt.Fprintf(w, "  ORT graph     not available: %s\n", k.Error)
			case r.Precision == INT8:
				fmt.Fprintf(w, "  ORT graph     %d integer nodes (%s), %d QuantizeLinear/DequantizeLinear left\n", k.Integer, integerOps(k.Ops), k.QDQ)
			case r.Precision == FP16 && k.InsertedCasts > 0:
				fmt.Fprintf(w, "  ORT graph     %d Casts inserted: this provider runs the float16 operators it has no float16 kernels for in float32\n", k.InsertedCasts)
			case r.Precision == FP16:
				fmt.Fprintf(w, "  ORT graph     every float16 node runs in float16\n")
			}
		}
		fmt.Fprintf(w, "  check         %d images (%s); contract kept (%s %s -> %s %s %s, %d classes)\n", c.Images, c.Source,
			c.Contract.Input, c.Contract.InputLayout, c.Contract.Output, c.Contract.OutputLayout, c.Contract.Kind, c.Contract.Classes)
		fmt.Fprintf(w, "  images        %s%s\n", listSome(baseNames(c.Paths)), calibrationNote(c))
		fmt.Fprintf(w, "  agreement     %s of pixels (lowest image %s: %s)\n", share(c.PixelAgreement), share(c.WorstAgreement), c.WorstImage)
		if c.Float != nil && c.Exported != nil {
			fmt.Fprintf(w, "  %-12s  %-8s  %-8s  %s\n", "IoU", "float", string(r.Precision), "change")
			for i, fc := range c.Float.Classes {
				ec := c.Exported.Classes[i]
				fmt.Fprintf(w, "  %-12s  %s  %s  %s\n", trim(fc.Name, 12), num(fc.IoU), num(ec.IoU), diff(fc.IoU, ec.IoU))
			}
			fmt.Fprintf(w, "  %-12s  %s  %s  %s\n", "mean", num(c.Float.MeanIoU), num(c.Exported.MeanIoU), diff(c.Float.MeanIoU, c.Exported.MeanIoU))
		}
		if c.FloatImagesPerSec > 0 && c.ExportedImagesPerSec > 0 {
			fmt.Fprintf(w, "  speed         %.2f images/s float, %.2f images/s %s (%.2f×; model time, batch 1)\n",
				c.FloatImagesPerSec, c.ExportedImagesPerSec, r.Precision, c.ExportedImagesPerSec/c.FloatImagesPerSec)
		}
	}
	status := "PASSED"
	if !r.Passed {
		status = "FAILED"
	}
	fmt.Fprintf(w, "  result        %s (minimum agreement %.4f)\n", status, r.MinAgreement)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "                %s\n", p)
	}
}

// calibrationNote says whether an int8 check ran on held-out images.
func calibrationNote(c *Check) string {
	switch {
	case c.CalibrationImages == nil:
		return ""
	case *c.CalibrationImages == 0:
		return " (held out: none was calibrated on)"
	}
	return fmt.Sprintf(" (%d of them calibrated on)", *c.CalibrationImages)
}

// share prints a share with 4 decimals, or 6 where 4 would round a
// disagreement away to 1.0000.
func share(a float64) string {
	if a < 1 && a >= 0.99995 {
		return fmt.Sprintf("%.6f", a)
	}
	return fmt.Sprintf("%.4f", a)
}

func mib(n int) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func num(v *float64) string {
	if v == nil {
		return "   —    "
	}
	return fmt.Sprintf("%.4f  ", *v)
}

func diff(a, b *float64) string {
	if a == nil || b == nil {
		return ""
	}
	return fmt.Sprintf("%+.4f", *b-*a)
}

// counts prints "Conv 60, Relu 23" with the largest counts first.
func counts(m map[string]int) string {
	type kv struct {
		k string
		v int
	}
	var list []kv
	for k, v := range m {
		list = append(list, kv{k, v})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].v != list[j].v {
			return list[i].v > list[j].v
		}
		return list[i].k < list[j].k
	})
	var parts []string
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%s %d", e.k, e.v))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// integerOps lists the integer operators of an optimised graph.
func integerOps(ops map[string]int) string {
	m := map[string]int{}
	for op, n := range ops {
		short := op[strings.LastIndex(op, ".")+1:]
		if strings.HasPrefix(short, "QLinear") || strings.HasSuffix(short, "Integer") || short == "QGemm" {
			m[short] += n
		}
	}
	return counts(m)
}
