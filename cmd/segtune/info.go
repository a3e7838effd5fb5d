package main

import (
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate/preprocsearch"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// infoOptions are info's settings: --json, and --find-preprocessing's
// (preprocsearch's, the data's layout and masks, the session).
type infoOptions struct {
	JSON                  bool
	Find                  preprocsearch.Config
	Layout                dataLayout
	LabelMap, MaskPalette string
	Session               runtime.Options
}

func infoCommand() *cli.Command {
	o := &infoOptions{}
	return &cli.Command{
		Name:      "info",
		Usage:     "describe an ONNX model: inputs, outputs, opsets, operators, parameters",
		ArgsUsage: "MODEL.onnx (or a known model's name, see segtune model list, or a bucket URL)",
		Description: "With --find-preprocessing (flags before MODEL), scores candidate preprocessings on a sample\n" +
			"of labelled images and prints them best first, saying which tie within the noise of the sample;\n" +
			"--write-sidecar writes the chosen one as the model's sidecar.",
		Flags:  append([]cli.Flag{jsonFlag(&o.JSON)}, findPreprocessingFlags(o)...),
		Action: func(c *cli.Context) error { return runInfo(c, o) },
	}
}

func runInfo(c *cli.Context, o *infoOptions) error {
	find := &o.Find
	// urfave/cli stops parsing flags at the first argument; accept
	// the documented `info MODEL --json` order too.
	paths := slices.DeleteFunc(c.Args().Slice(), func(a string) bool { return a == "--json" || a == "-json" })
	asJSON := o.JSON || len(paths) < c.NArg()
	if len(paths) != 1 {
		return cli.Exit("usage: segtune info [--find-preprocessing --images DIR --masks DIR | --data DIR] MODEL.onnx [--json]", 2)
	}
	find.Given = given(c)
	if err := find.Validate(); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	path, err := resolveModel(c, paths[0])
	if err != nil {
		return err
	}
	if find.Find {
		return findPreprocessing(c, o, path, asJSON)
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
