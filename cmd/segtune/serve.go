package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
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
	o := &serveCommandOptions{Addr: "127.0.0.1:8080", Server: serve.Options{MaxBatch: 4, BatchWait: 5 * time.Millisecond, MaxBodyBytes: 32 << 20,
		MaxPixels: 40_000_000, MaxConns: 256, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second, ShutdownTimeout: 30 * time.Second, MinBodyRate: 16 << 10}}
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
	opts := o.Server
	opts.Overlay = imageio.OverlayOptions{Alpha: o.Colour.Alpha, Skip: []uint8{0}}
	if err := opts.Check(); err != nil {
		return err
	}
	if err := checkListenAddr(o.Addr); err != nil {
		return err
	}
	session := sessionFor(c, o.Session)
	if err := loadRuntime(c, o.Session.Device); err != nil {
		return err
	}
	settings, err := o.Pre.modelSettings(c, o.Model)
	if err != nil {
		return err
	}
	if opts.Palette, err = o.Colour.palette(settings.Sidecar); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer ln.Close()
	seg, err := openModel(c, o.Model, settings.Sidecar, resolve.SegmenterOptions{Session: session})
	if err != nil {
		return err
	}
	defer seg.Close()
	if err := seg.CheckPalette(opts.Palette); err != nil {
		return err
	}
	opts.MaxBatch, opts.Classes = clampBatch(c, seg, opts.MaxBatch), settings.Classes
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, os.Interrupt)
	defer stop()
	notef(c, "segtune: serving %s on http://%s (%s)", o.Model, ln.Addr(), seg.Session.Device)
	if err := serve.New(seg, opts).Serve(ctx, ln); err != nil {
		return err
	}
	notef(c, "segtune: stopped")
	return nil
}

// checkListenAddr refuses an --addr that is not host:port with a port:
// net.Listen takes "" (from --addr "$ADDR" with ADDR unset) as every
// interface on a random port, exposing the service without a word. An
// empty host (":8080") is every interface too, but said on purpose.
func checkListenAddr(addr string) error {
	if addr == "" {
		return fmt.Errorf("--addr is empty: give host:port, e.g. 127.0.0.1:8080 (the default; :8080 listens on every interface)")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q is not host:port (e.g. 127.0.0.1:8080): %v", addr, err)
	}
	if port == "" {
		return fmt.Errorf("--addr %q names no port (e.g. 127.0.0.1:8080; port 0 picks a free one)", addr)
	}
	return nil
}
