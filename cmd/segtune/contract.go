package main

import (
	"encoding/json"
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

// writeSettings prints, for `segtune info`, each part of the settings a
// model brings and the source it comes from.
func writeSettings(w io.Writer, layers []settingsLayer, metaErr error) {
	fmt.Fprintf(w, "\nsettings:\n")
	if metaErr != nil {
		fmt.Fprintf(w, "  metadata_props %s ignored: %v\n", imageio.ContractKey, metaErr)
	}
	if len(layers) == 0 {
		fmt.Fprintf(w, "  none: not a known model, no metadata_props %s, no sidecar %s; "+
			"segment and eval assume RGB, raw 0..255 values unless flags say otherwise\n", imageio.ContractKey, "MODEL"+imageio.SidecarExt)
		return
	}
	s := mergeLayers(layers)
	from := settingsOrigins(layers)
	parts := []struct {
		name string
		v    any
	}{
		{"preprocess", s.Preprocess}, {"classes", s.Classes}, {"palette", s.Palette},
		{"label_map", s.LabelMap}, {"ignore_label", s.IgnoreLabel}, {"output", s.Output},
	}
	for _, p := range parts {
		src, ok := from[p.name]
		if !ok {
			fmt.Fprintf(w, "  %-13s not set\n", p.name)
			continue
		}
		js, err := json.Marshal(p.v)
		if err != nil {
			js = []byte(err.Error())
		}
		fmt.Fprintf(w, "  %-13s %s  (from %s)\n", p.name, js, src)
	}
}
