package resolve

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

// Description is what segtune says of a model (`segtune info`, and its
// --json).
type Description struct {
	onnx.Summary
	Family         string             `json:"family"`
	FamilyEvidence []string           `json:"family_evidence,omitempty"`
	UnsupportedOps []string           `json:"unsupported_ops,omitempty"`
	Quantized      onnx.Quantization  `json:"quantized,omitempty"`
	Contract       *contract.Contract `json:"contract,omitempty"`
	ContractError  string             `json:"contract_error,omitempty"`
	Settings       *imageio.Sidecar   `json:"settings,omitempty"`
	SettingsFrom   map[string]string  `json:"settings_from,omitempty"`
	MetadataError  string             `json:"metadata_error,omitempty"`
	// SettingsNotes say what a Hub repository's files lacked or got wrong.
	SettingsNotes []string `json:"settings_notes,omitempty"`

	layers  []Layer
	metaErr error
}

// Describe reads the model at path with the settings it brings
// (registry, metadata_props, sidecar). A model that segtune cannot feed
// still gets its summary, with the reason.
func Describe(path string) (*Description, error) {
	m, err := onnx.Load(path)
	if err != nil {
		return nil, err
	}
	r := &Description{Summary: m.Summary()}
	r.Family, r.FamilyEvidence = models.Family(m)
	// Read from the graph alone, so that a model fine-tuning would refuse
	// is named before any work starts.
	r.UnsupportedOps = grad.Unsupported(m)
	r.Quantized = onnx.Quantized(m)
	if r.layers, r.metaErr, err = Layers(path); err != nil {
		return nil, err
	}
	settings := Merge(r.layers)
	ct, ctErr := contract.Read(m, Overrides(settings))
	r.Contract = ct
	if ctErr != nil {
		r.ContractError = ctErr.Error()
	}
	if len(r.layers) > 0 {
		r.Settings, r.SettingsFrom = &settings, Origins(r.layers)
	}
	if r.metaErr != nil {
		r.MetadataError = r.metaErr.Error()
	}
	for _, l := range r.layers {
		r.SettingsNotes = append(r.SettingsNotes, l.Notes...)
	}
	return r, nil
}

// WriteText writes the description as `segtune info` prints it.
func (r *Description) WriteText(w io.Writer) error {
	if err := r.Summary.WriteText(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nfamily       %s", r.Family)
	if len(r.FamilyEvidence) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(r.FamilyEvidence, ", "))
	}
	switch {
	case len(r.Quantized) > 0: // the cause, before the operators it brings
		fmt.Fprintf(w, "\nfine-tuning  refused: %s\n", &network.QuantizedError{Ops: r.Quantized})
	case len(r.UnsupportedOps) > 0:
		fmt.Fprintf(w, "\nfine-tuning  refused: no gradient rule for %s (artifacts and finetune stop there)\n", strings.Join(r.UnsupportedOps, ", "))
	default:
		fmt.Fprintf(w, "\nfine-tuning  every operator on a gradient path has a rule\n")
	}
	if r.ContractError != "" {
		fmt.Fprintf(w, "\ncontract: %s\n", r.ContractError)
	} else {
		writeContract(w, r.Contract)
	}
	writeSettings(w, r.layers, r.metaErr)
	return nil
}

// writeContract prints a contract for WriteText.
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

// writeSettings prints, for WriteText, each part of the settings a model
// brings and the source it comes from.
func writeSettings(w io.Writer, layers []Layer, metaErr error) {
	fmt.Fprintf(w, "\nsettings:\n")
	if metaErr != nil {
		fmt.Fprintf(w, "  metadata_props %s ignored: %v\n", imageio.ContractKey, metaErr)
	}
	for _, l := range layers {
		for _, n := range l.Notes {
			fmt.Fprintf(w, "  note (%s): %s\n", l.From, n)
		}
	}
	if len(layers) == 0 {
		fmt.Fprintf(w, "  none: not a known model, no metadata_props %s, no sidecar %s; "+
			"segment and eval assume RGB, raw 0..255 values unless flags say otherwise\n", imageio.ContractKey, "MODEL"+imageio.SidecarExt)
		return
	}
	s := Merge(layers)
	from := Origins(layers)
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
