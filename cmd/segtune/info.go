package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
)

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "describe an ONNX model: inputs, outputs, opsets, operators, parameters",
		ArgsUsage: "MODEL.onnx (or a known model's name, see segtune model list, or a bucket URL)",
		Flags:     []cli.Flag{jsonFlag},
		Action:    runInfo,
	}
}

// infoReport is what `segtune info` says of a model (its --json).
type infoReport struct {
	onnx.Summary
	Family         string             `json:"family"`
	FamilyEvidence []string           `json:"family_evidence,omitempty"`
	UnsupportedOps []string           `json:"unsupported_ops,omitempty"`
	Contract       *contract.Contract `json:"contract,omitempty"`
	ContractError  string             `json:"contract_error,omitempty"`
	Settings       *imageio.Sidecar   `json:"settings,omitempty"`
	SettingsFrom   map[string]string  `json:"settings_from,omitempty"`
	MetadataError  string             `json:"metadata_error,omitempty"`

	layers  []settingsLayer
	metaErr error
}

func runInfo(c *cli.Context) error {
	// urfave/cli stops parsing flags at the first argument; accept
	// the documented `info MODEL --json` order too.
	asJSON := c.Bool("json")
	var paths []string
	for _, a := range c.Args().Slice() {
		if a == "--json" || a == "-json" {
			asJSON = true
		} else {
			paths = append(paths, a)
		}
	}
	if len(paths) != 1 {
		return cli.Exit("usage: segtune info MODEL.onnx [--json]", 2)
	}
	path, err := resolveModel(c, paths[0])
	if err != nil {
		return err
	}
	r, err := describeModel(path)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(os.Stdout, r)
	}
	return r.writeText(os.Stdout)
}

// describeModel reads the model at path with the settings it brings
// (registry, metadata_props, sidecar). A model that segtune cannot feed
// still gets its summary, with the reason.
func describeModel(path string) (*infoReport, error) {
	m, err := onnx.Load(path)
	if err != nil {
		return nil, err
	}
	r := &infoReport{Summary: m.Summary()}
	r.Family, r.FamilyEvidence = modelFamily(m)
	// Read from the graph alone, so that a model fine-tuning would refuse
	// is named before any work starts.
	r.UnsupportedOps = grad.Unsupported(m)
	if r.layers, r.metaErr, err = modelLayers(path); err != nil {
		return nil, err
	}
	settings := mergeLayers(r.layers)
	ct, ctErr := contract.Read(m, finetune.ContractOverrides(preprocessOf(settings), outputOf(settings)))
	r.Contract = ct
	if ctErr != nil {
		r.ContractError = ctErr.Error()
	}
	if len(r.layers) > 0 {
		r.Settings, r.SettingsFrom = &settings, settingsOrigins(r.layers)
	}
	if r.metaErr != nil {
		r.MetadataError = r.metaErr.Error()
	}
	return r, nil
}

func (r *infoReport) writeText(w io.Writer) error {
	if err := r.Summary.WriteText(w); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nfamily       %s", r.Family)
	if len(r.FamilyEvidence) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(r.FamilyEvidence, ", "))
	}
	if len(r.UnsupportedOps) > 0 {
		fmt.Fprintf(w, "\nfine-tuning  refused: no gradient rule for %s (artifacts and finetune stop there)\n", strings.Join(r.UnsupportedOps, ", "))
	} else {
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
