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
		Description: "With --find-preprocessing (flags before MODEL), scores candidate preprocessings on a sample\n" +
			"of labelled images and prints them best first, saying which tie within the noise of the sample;\n" +
			"--write-sidecar writes the chosen one as the model's sidecar.",
		Flags:  append([]cli.Flag{jsonFlag(new(bool))}, findPreprocessingFlags()...),
		Action: runInfo,
	}
}

func runInfo(c *cli.Context) error {
	// urfave/cli stops parsing flags at the first argument; accept
	// the documented `info MODEL --json` order too.
	paths := slices.DeleteFunc(c.Args().Slice(), func(a string) bool { return a == "--json" || a == "-json" })
	asJSON := c.Bool("json") || len(paths) < c.NArg()
	if len(paths) != 1 {
		return cli.Exit("usage: segtune info [--find-preprocessing --images DIR --masks DIR | --data DIR] MODEL.onnx [--json]", 2)
	}
	if err := checkFindPreprocessingFlags(c); err != nil {
		return err
	}
	path, err := resolveModel(c, paths[0])
	if err != nil {
		return err
	}
	if c.Bool("find-preprocessing") {
		return findPreprocessing(c, path, asJSON)
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
