package onnx

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteText writes the summary for people: a header of key facts, a table of
// inputs and outputs, and the op histogram, each aligned in columns.
func (s Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	if s.Path != "" {
		line("path\t%s", s.Path)
	}
	switch {
	case s.FileIRVersion != 0:
		line("ir version\t%d (the file's %d, which listed its %d weights as graph inputs too; read as weights)", s.IRVersion, s.FileIRVersion, s.WeightInputs)
	case s.WeightInputs > 0:
		line("ir version\t%d (%d weights also listed as graph inputs; read as weights)", s.IRVersion, s.WeightInputs)
	default:
		line("ir version\t%d", s.IRVersion)
	}
	var opsets []string
	for _, o := range s.Opsets {
		d := o.Domain
		if d == "" {
			d = "ai.onnx"
		}
		opsets = append(opsets, fmt.Sprintf("%s %d", d, o.Version))
	}
	line("opsets\t%s", orDash(strings.Join(opsets, ", ")))
	line("producer\t%s", orDash(strings.TrimSpace(s.ProducerName+" "+s.ProducerVersion)))
	if s.Graph != "" {
		line("graph\t%s", s.Graph)
	}
	line("nodes\t%d", s.Nodes)
	line("initializers\t%d (%s)", s.Initializers, humanBytes(s.InitializerBytes))
	line("parameters\t%s (%s)", groupDigits(s.Parameters), humanBytes(s.ParameterBytes))
	line("trainable\t%s in %d tensors", groupDigits(s.Trainable), s.TrainableTensors)
	for _, f := range frozenGroups(s.Frozen) {
		line("frozen\t%s", f)
	}
	line("")
	line("\tname\ttype\tshape")
	for _, v := range s.Inputs {
		line("input\t%s\t%s\t%s", v.Name, v.Type, shapeString(v.Dims))
	}
	for _, v := range s.Outputs {
		line("output\t%s\t%s\t%s", v.Name, v.Type, shapeString(v.Dims))
	}
	if len(s.Ops) > 0 {
		line("")
		line("op\tcount")
		for _, o := range s.Ops {
			line("%s\t%d", o.Op, o.Count)
		}
	}
	return tw.Flush()
}

// String returns the text form of WriteText.
func (s Summary) String() string {
	var b strings.Builder
	s.WriteText(&b) // a strings.Builder does not fail
	return b.String()
}

func shapeString(dims []string) string {
	if dims == nil {
		return "?"
	}
	return "[" + strings.Join(dims, ", ") + "]"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// groupDigits writes n with thousands separators: 1234567 -> "1,234,567".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// humanBytes writes a byte count in binary units: 9437184 -> "9.0 MiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// frozenShown is how many names of one reason the text form lists.
const frozenShown = 4

// frozenGroups writes the frozen float initializers one line per reason,
// in order of first appearance: "2 tensors, a BatchNormalization running
// statistic: bn.mean, bn.var".
func frozenGroups(fs []Frozen) []string {
	var reasons []string
	names := map[string][]string{}
	for _, f := range fs {
		if names[f.Reason] == nil {
			reasons = append(reasons, f.Reason)
		}
		names[f.Reason] = append(names[f.Reason], f.Name)
	}
	out := make([]string, 0, len(reasons))
	for _, r := range reasons {
		ns := names[r]
		list := strings.Join(ns[:min(len(ns), frozenShown)], ", ")
		if len(ns) > frozenShown {
			list += fmt.Sprintf(" and %d more", len(ns)-frozenShown)
		}
		unit := "tensors"
		if len(ns) == 1 {
			unit = "tensor"
		}
		out = append(out, fmt.Sprintf("%d %s, %s: %s", len(ns), unit, r, list))
	}
	return out
}
