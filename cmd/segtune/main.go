// Command segtune fine-tunes, runs and exports ONNX semantic-segmentation
// networks. Run `segtune help` for the commands.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/cliflag"
)

func main() {
	app := newApp()
	if err := app.Run(os.Args); err != nil {
		var exit cli.ExitCoder
		if errors.As(err, &exit) {
			if msg := err.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "segtune:", msg)
			}
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "segtune:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	g := &globalOptions{}
	app := &cli.App{
		Name:  "segtune",
		Usage: "fine-tune, run and export ONNX semantic-segmentation models",
		Description: "segtune runs ONNX segmentation networks (DeepLabV3+ first of all) on ONNX Runtime,\n" +
			"fine-tunes them with an F-measure-on-object-size regularizer, and exports the refined\n" +
			"networks back to ONNX. ONNX Runtime is found through --ort-lib, $ONNXRUNTIME_SHARED_LIBRARY_PATH\n" +
			"or the copy `make ort` installs.",
		Flags:    globalFlags(g),
		Metadata: map[string]any{globalsKey: g},
		Commands: []*cli.Command{
			infoCommand(),
			segmentCommand(),
			serveCommand(),
			evalCommand(),
			finetuneCommand(),
			exportCommand(),
			artifactsCommand(),
			modelCommand(),
			dataCommand(),
			demoCommand(),
			versionCommand(),
			doctorCommand(),
			completionCommand(),
		},
		EnableBashCompletion: true,
		// main reports errors and chooses the exit status; the default
		// handler would exit from inside Run, which tests cannot survive.
		ExitErrHandler: func(*cli.Context, error) {},
	}
	cliflag.OneLineUsageErrors(app) // a flag that does not parse: one line, not the whole help
	// Hooks installed later run first.
	cliflag.BeforeAll(app.Commands, checkNumericFlags)           // numeric flags are checked before any work
	resolveModelFlags(app.Commands)                              // --model NAME for every command
	nameFlags(app.Commands)                                      // library errors name the flag
	cliflag.BeforeAll(app.Commands, func(c *cli.Context) error { // file:// URLs become paths
		if err := cliflag.FileURLsToPaths(c); err != nil {
			return cli.Exit(err.Error(), 2)
		}
		return nil
	})
	installConfigFiles(app.Commands) // --config FILE sets flags, first of all
	return app
}
