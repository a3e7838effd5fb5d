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
			if c.NArg() != 1 {
				return cli.Exit("usage: segtune info MODEL.onnx [--json]", 2)
			}
			m, err := onnx.Load(c.Args().First())
			if err != nil {
				return err
			}
			s := m.Summary()
			if c.Bool("json") {
				return printJSON(os.Stdout, s)
			}
			return s.WriteText(os.Stdout)
		},
	}
}
