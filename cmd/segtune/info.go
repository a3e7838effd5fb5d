package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/onnx"
)

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "describe an ONNX model: inputs, outputs, opsets, operators, parameters",
		ArgsUsage: "MODEL.onnx",
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
			m, err := onnx.Load(paths[0])
			if err != nil {
				return err
			}
			s := m.Summary()
			if asJSON {
				return printJSON(os.Stdout, s)
			}
			return s.WriteText(os.Stdout)
		},
	}
}
