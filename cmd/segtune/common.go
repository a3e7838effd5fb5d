package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/segtune/segtune/runtime"
)

// Flags shared by the commands that run a model.
var (
	deviceFlag  = &cli.StringFlag{Name: "device", Value: "cpu", Usage: "cpu, cuda, or auto (CUDA when available, else CPU)"}
	threadsFlag = &cli.IntFlag{Name: "threads", Usage: "ONNX Runtime intra-op threads (0: one per core)"}
	jsonFlag    = &cli.BoolFlag{Name: "json", Usage: "print a machine-readable summary as JSON on stdout"}
)

// initRuntime loads ONNX Runtime from the --ort-lib flag, the environment or
// the installer's cache.
func initRuntime(c *cli.Context) error {
	lib := c.String("ort-lib")
	if err := runtime.InitFor(lib, c.String("device")); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	return nil
}

func sessionOptions(c *cli.Context) runtime.Options {
	var log io.Writer = os.Stderr
	if c.Bool("quiet") {
		log = io.Discard
	}
	return runtime.Options{Device: c.String("device"), Threads: c.Int("threads"), Log: log}
}

// progress returns a progress bar on stderr when it is a terminal and the
// user did not ask for quiet or JSON output; otherwise a silent bar.
func progress(c *cli.Context, total int, what string) *progressbar.ProgressBar {
	if c.Bool("quiet") || !term.IsTerminal(int(os.Stderr.Fd())) {
		return progressbar.DefaultSilent(int64(total), what)
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("img"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000),
	)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// notef prints a notice on stderr unless --quiet.
func notef(c *cli.Context, format string, args ...any) {
	if !c.Bool("quiet") {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print segtune's and ONNX Runtime's versions",
		Action: func(c *cli.Context) error {
			fmt.Println("segtune", version)
			if err := initRuntime(c); err != nil {
				fmt.Println("ONNX Runtime: not found:", err)
				return nil
			}
			v, _ := runtime.Version()
			fmt.Printf("ONNX Runtime %s (%s)\n", v, runtime.LibraryPath())
			return nil
		},
	}
}

const version = "0.1.0"
