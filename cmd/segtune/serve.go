package main

import (
	"os"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/serve"
)

// serveCommandOptions are what serve's flags set: the server's options
// (serve.Options) and how the model runs.
type serveCommandOptions struct {
	Model, Addr string
	Server      serve.Options
	Session     runtime.Options
	Colour      colourOptions
	Pre         preprocessOptions
}

func serveCommand() *cli.Command {
	o := &serveCommandOptions{Addr: serve.DefaultAddr, Server: serve.DefaultOptions()}
	so := &o.Server
	return &cli.Command{
		Name:  "serve",
		Usage: "answer segmentation requests over HTTP (POST /v1/segment, GET /healthz, GET /metrics)",
		Description: "POST an image's bytes to /v1/segment and get its mask: the palette PNG `segment` writes,\n" +
			"byte for byte; ?overlay=1 for a colour overlay; ?format=json or Accept: application/json for\n" +
			"the pixels of each class (and the mask, base64). Concurrent requests are batched into one\n" +
			"model run (--max-batch, --batch-wait). SIGTERM or SIGINT stops accepting and drains in-flight requests.",
		Flags: slices.Concat([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "ONNX model or segtune checkpoint", Destination: &o.Model},
			&cli.StringFlag{Name: "addr", Value: o.Addr, Usage: "address to listen on (host:port)", Destination: &o.Addr},
			&cli.IntFlag{Name: "max-batch", Value: so.MaxBatch, Usage: "most requests per model run", Destination: &so.MaxBatch},
			&cli.DurationFlag{Name: "batch-wait", Value: so.BatchWait, Usage: "how long a request waits for others to share its model run", Destination: &so.BatchWait},
			&cli.Int64Flag{Name: "max-body", Value: so.MaxBodyBytes, Usage: "largest request body in bytes (413 over it)", Destination: &so.MaxBodyBytes},
			&cli.Int64Flag{Name: "max-pixels", Value: so.MaxPixels, Usage: "most pixels an image may declare (413 over it, checked before decoding)", Destination: &so.MaxPixels},
			&cli.IntFlag{Name: "max-pending", Usage: "requests handled at once, more get 503 (0: 4 × --max-batch, at least 8)", Destination: &so.MaxPending},
			&cli.IntFlag{Name: "max-conns", Value: so.MaxConns, Usage: "open connections at once, more get 503", Destination: &so.MaxConns},
			&cli.DurationFlag{Name: "read-timeout", Value: so.ReadTimeout, Usage: "time to read a request (408 after it)", Destination: &so.ReadTimeout},
			&cli.DurationFlag{Name: "write-timeout", Value: so.WriteTimeout, Usage: "time to answer a request once its headers are in (503 after it)", Destination: &so.WriteTimeout},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: so.ShutdownTimeout, Usage: "time in-flight requests get to finish on SIGTERM", Destination: &so.ShutdownTimeout},
			&cli.Int64Flag{Name: "min-body-rate", Value: so.MinBodyRate, Usage: "slowest a request body may come in bytes/s, after its first 2s (408 below it)", Destination: &so.MinBodyRate},
		}, sessionFlags(&o.Session), maskColourFlags(&o.Colour), preprocessFlags(&o.Pre)),
		Action: func(c *cli.Context) error { return runServe(c, o) },
	}
}

func runServe(c *cli.Context, o *serveCommandOptions) error {
	req := serve.Request{Options: o.Server, Addr: o.Addr, Alpha: o.Colour.Alpha, Palette: o.Colour.Palette,
		Signals: []os.Signal{syscall.SIGTERM, os.Interrupt}, Notes: noticeWriter(c), Name: flagOf}
	if err := req.Check(); err != nil {
		return err
	}
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	settings, err := o.Pre.modelSettings(c, o.Model)
	if err != nil {
		return err
	}
	return req.Run(c.Context, settings.Sidecar, func() (*inference.Segmenter, error) {
		return openModel(c, o.Model, settings.Sidecar, resolve.SegmenterOptions{Session: sessionFor(c, o.Session)})
	})
}
