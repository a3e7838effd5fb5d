package main

import (
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/resolve"
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

func runInfo(c *cli.Context) error {
	// urfave/cli stops parsing flags at the first argument; accept
	// the documented `info MODEL --json` order too.
	paths := slices.DeleteFunc(c.Args().Slice(), func(a string) bool { return a == "--json" || a == "-json" })
	asJSON := c.Bool("json") || len(paths) < c.NArg()
	if len(paths) != 1 {
		return cli.Exit("usage: segtune info MODEL.onnx [--json]", 2)
	}
	path, err := resolveModel(c, paths[0])
	if err != nil {
		return err
	}
	r, err := resolve.Describe(path)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(os.Stdout, r)
	}
	return r.WriteText(os.Stdout)
}
