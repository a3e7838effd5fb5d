package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/inference/report"
	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/runtime"
)

// globalOptions are the app's own flags, given before the command.
type globalOptions struct {
	ORTLib    string // --ort-lib
	Quiet     bool   // --quiet
	MaxMemory string // --max-memory, parsed by the memory-limit hook
}

// globalFlags bind the app's own flags into g.
func globalFlags(g *globalOptions) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ort-lib", Usage: "path of the ONNX Runtime shared library", EnvVars: []string{"ONNXRUNTIME_SHARED_LIBRARY_PATH"}, Destination: &g.ORTLib},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bars or notices", Destination: &g.Quiet},
		&cli.StringFlag{Name: "max-memory", Usage: "memory limit for tensors, images and batches, e.g. 8G (default: 3/4 of the smallest of this machine's memory, the cgroup's limit and half of RLIMIT_AS; segtune doctor says which)", EnvVars: []string{"SEGTUNE_MAX_MEMORY"}, Destination: &g.MaxMemory},
	}
}

// globalsKey holds an app's *globalOptions in its Metadata, where every
// command's action finds them (globals).
const globalsKey = "segtune.globals"

// globals are the app-wide flags of the app c runs in (zero values in an
// app newApp did not make, as some tests build).
func globals(c *cli.Context) *globalOptions {
	if g, ok := c.App.Metadata[globalsKey].(*globalOptions); ok {
		return g
	}
	return &globalOptions{}
}

// deviceFlag, threadsFlag and jsonFlag are the flags shared by the
// commands that run a model: --device and --threads bind into the session
// options (sessionFlags binds both), --json into the command's switch.
func deviceFlag(device *string) cli.Flag {
	return &cli.StringFlag{Name: "device", Value: "cpu", Usage: "cpu, cuda, or auto (CUDA when available, else CPU)", Destination: device}
}

func threadsFlag(threads *int) cli.Flag {
	return &cli.IntFlag{Name: "threads", Usage: "ONNX Runtime intra-op threads (0: one per core)", Destination: threads,
		Action: checkedBy[int](func() error { return runtime.Options{Threads: *threads}.Validate() })}
}

// checkedBy is a flag Action that runs check once the flag is set (on the
// command line or by a --config file; before the command's action): a
// value its library refuses exits with status 2, named by its flag.
func checkedBy[T any](check func() error) func(*cli.Context, T) error {
	return func(*cli.Context, T) error {
		if err := check(); err != nil {
			return cli.Exit(withFlagNames(err).Error(), 2)
		}
		return nil
	}
}

func jsonFlag(asJSON *bool) cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print a machine-readable summary as JSON on stdout", Destination: asJSON}
}

// sessionFlags are --device and --threads into o.
func sessionFlags(o *runtime.Options) []cli.Flag {
	o.Device = "cpu"
	return []cli.Flag{deviceFlag(&o.Device), threadsFlag(&o.Threads)}
}

// loadRuntime loads ONNX Runtime from --ort-lib, the environment or the
// installer's cache, for device.
func loadRuntime(c *cli.Context, device string) error {
	if err := runtime.InitFor(globals(c).ORTLib, device); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	return nil
}

// sessionFor is o with notices on stderr unless --quiet.
func sessionFor(c *cli.Context, o runtime.Options) runtime.Options {
	o.Log = noticeWriter(c)
	return o
}

// progress is a bar counting images on a terminal, unless --quiet.
func progress(c *cli.Context, total int, what string) *progressbar.ProgressBar {
	return progressui.Items(total, what, progressui.Shown(globals(c).Quiet))
}

func printJSON(w io.Writer, v any) error { return report.JSON(w, v) }

// printer prints a run's summary on stdout, its failures on stderr.
func printer(asJSON bool) report.Printer {
	return report.Printer{Out: os.Stdout, Err: os.Stderr, Prefix: "segtune: ", JSON: asJSON}
}

// notef prints a notice on stderr unless --quiet.
func notef(c *cli.Context, format string, args ...any) {
	fmt.Fprintf(noticeWriter(c), format+"\n", args...)
}

// noticeWriter is where notices go: stderr unless --quiet.
func noticeWriter(c *cli.Context) io.Writer {
	if globals(c).Quiet {
		return io.Discard
	}
	return os.Stderr
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print segtune's and ONNX Runtime's versions",
		Action: func(c *cli.Context) error {
			fmt.Println("segtune", version)
			if err := loadRuntime(c, ""); err != nil {
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
