package main

import (
	"fmt"
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
		Action: func(c *cli.Context) error {
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
			paths[0] = path
			m, err := onnx.Load(paths[0])
			if err != nil {
				return err
			}
			s := m.Summary()
			family, evidence := modelFamily(m)
			// Read from the graph alone, so that a model fine-tuning would
			// refuse is named before any work starts.
			unsupported := grad.Unsupported(m)
			// The settings the model brings (registry, metadata_props,
			// sidecar) and the contract read with them; a model that
			// segtune cannot feed still gets its summary, with the reason.
			layers, metaErr, err := modelLayers(paths[0])
			if err != nil {
				return err
			}
			settings := mergeLayers(layers)
			ct, ctErr := contract.Read(m, finetune.ContractOverrides(preprocessOf(settings), outputOf(settings)))
			if asJSON {
				out := struct {
					onnx.Summary
					Family         string             `json:"family"`
					FamilyEvidence []string           `json:"family_evidence,omitempty"`
					UnsupportedOps []string           `json:"unsupported_ops,omitempty"`
					Contract       *contract.Contract `json:"contract,omitempty"`
					ContractError  string             `json:"contract_error,omitempty"`
					Settings       *imageio.Sidecar   `json:"settings,omitempty"`
					SettingsFrom   map[string]string  `json:"settings_from,omitempty"`
					MetadataError  string             `json:"metadata_error,omitempty"`
				}{Summary: s, Family: family, FamilyEvidence: evidence, UnsupportedOps: unsupported, Contract: ct}
				if ctErr != nil {
					out.ContractError = ctErr.Error()
				}
				if len(layers) > 0 {
					out.Settings, out.SettingsFrom = &settings, settingsOrigins(layers)
				}
				if metaErr != nil {
					out.MetadataError = metaErr.Error()
				}
				return printJSON(os.Stdout, out)
			}
			if err := s.WriteText(os.Stdout); err != nil {
				return err
			}
			fmt.Printf("\nfamily       %s", family)
			if len(evidence) > 0 {
				fmt.Printf(" (%s)", strings.Join(evidence, ", "))
			}
			if len(unsupported) > 0 {
				fmt.Printf("\nfine-tuning  refused: no gradient rule for %s (artifacts and finetune stop there)\n", strings.Join(unsupported, ", "))
			} else {
				fmt.Printf("\nfine-tuning  every operator on a gradient path has a rule\n")
			}
			if ctErr != nil {
				fmt.Printf("\ncontract: %v\n", ctErr)
			} else {
				writeContract(os.Stdout, ct)
			}
			writeSettings(os.Stdout, layers, metaErr)
			return nil
		},
	}
}
