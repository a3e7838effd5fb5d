package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
)

// contractOverrides turns the settings (sidecar, checkpoint, flags) into
// what the contract reader takes where the graph cannot tell.
func contractOverrides(s imageio.Sidecar) contract.Overrides {
	var o contract.Overrides
	if s.Preprocess != nil {
		o.InputLayout = contract.Layout(strings.ToUpper(string(s.Preprocess.Layout)))
	}
	if s.Output != nil {
		o.OutputLayout = contract.Layout(strings.ToUpper(string(s.Output.Layout)))
		o.Threshold = s.Output.Threshold
	}
	return o
}

// readContract reads the model's contract, naming the model in errors.
func readContract(path string, m *onnx.Model, s imageio.Sidecar) (*contract.Contract, error) {
	ct, err := contract.Read(m, contractOverrides(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ct, nil
}

// writeContract prints a contract for `segtune info`.
func writeContract(w io.Writer, ct *contract.Contract) {
	size := func(v int64) string {
		if v > 0 {
			return fmt.Sprint(v)
		}
		return "any"
	}
	fmt.Fprintf(w, "\ncontract:\n")
	fmt.Fprintf(w, "  input   %s  %s (%s)  batch %s, %sx%s (HxW)\n", ct.Input, ct.InputLayout, ct.InputLayoutFrom,
		size(ct.Batch), size(ct.Height), size(ct.Width))
	fmt.Fprintf(w, "  output  %s  %s (%s)  %s", ct.Output, ct.OutputLayout, ct.OutputLayoutFrom, ct.Kind)
	if ct.Activation != "" {
		fmt.Fprintf(w, " (node %s; training reads %s)", ct.Activation, ct.Scores)
	}
	fmt.Fprintln(w)
	switch {
	case ct.Kind == contract.Sigmoid:
		fmt.Fprintf(w, "  classes %d: 0 = no channel above %.2g, k+1 = channel k of %d\n", ct.Classes, ct.Threshold, ct.Channels)
	case ct.Classes > 0:
		fmt.Fprintf(w, "  classes %d\n", ct.Classes)
	default:
		fmt.Fprintf(w, "  classes: not declared by the graph\n")
	}
}
