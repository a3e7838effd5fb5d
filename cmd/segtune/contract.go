package main

import (
	"fmt"
	"io"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
)

// readContract reads the model's contract, naming the model in errors.
func readContract(path string, m *onnx.Model, s imageio.Sidecar) (*contract.Contract, error) {
	ct, err := contract.Read(m, finetune.ContractOverrides(preprocessOf(s), outputOf(s)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ct, nil
}

func preprocessOf(s imageio.Sidecar) imageio.Preprocess {
	if s.Preprocess == nil {
		return imageio.Preprocess{}
	}
	return *s.Preprocess
}

func outputOf(s imageio.Sidecar) imageio.OutputSpec {
	if s.Output == nil {
		return imageio.OutputSpec{}
	}
	return *s.Output
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
	case ct.Binary:
		fmt.Fprintf(w, "  classes 2: one logit channel read as binary: 1 (foreground) where sigmoid(logit) > %.2g, else 0\n", ct.Threshold)
	case ct.Kind == contract.Sigmoid:
		fmt.Fprintf(w, "  classes %d: 0 = no channel above %.2g, k+1 = channel k of %d\n", ct.Classes, ct.Threshold, ct.Channels)
	case ct.Classes > 0:
		fmt.Fprintf(w, "  classes %d\n", ct.Classes)
	default:
		fmt.Fprintf(w, "  classes: not declared by the graph\n")
	}
}
