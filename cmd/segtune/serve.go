package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/serve"
)

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "answer segmentation requests over HTTP (POST /v1/segment, GET /healthz, GET /metrics)",
		Description: "POST an image's bytes to /v1/segment and get its mask: the palette PNG `segment` writes,\n" +
			"byte for byte; ?overlay=1 for a colour overlay; ?format=json or Accept: application/json for\n" +
			"the pixels of each class (and the mask, base64). Concurrent requests are batched into one\n" +
			"model run (--max-batch, --batch-wait). SIGTERM or SIGINT stops accepting and drains in-flight requests.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "ONNX model or segtune checkpoint"},
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "address to listen on (host:port)"},
			&cli.IntFlag{Name: "max-batch", Value: 4, Usage: "most requests per model run"},
			&cli.DurationFlag{Name: "batch-wait", Value: 5 * time.Millisecond, Usage: "how long a request waits for others to share its model run"},
			&cli.Int64Flag{Name: "max-body", Value: 32 << 20, Usage: "largest request body in bytes (413 over it)"},
			&cli.Int64Flag{Name: "max-pixels", Value: 40_000_000, Usage: "most pixels an image may declare (413 over it, checked before decoding)"},
			&cli.IntFlag{Name: "max-pending", Usage: "requests handled at once, more get 503 (0: 4 × --max-batch, at least 8)"},
			&cli.IntFlag{Name: "max-conns", Value: 256, Usage: "open connections at once, more get 503"},
			&cli.DurationFlag{Name: "read-timeout", Value: 30 * time.Second, Usage: "time to read a request (408 after it)"},
			&cli.DurationFlag{Name: "write-timeout", Value: 60 * time.Second, Usage: "time to answer a request once its headers are in (503 after it)"},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: 30 * time.Second, Usage: "time in-flight requests get to finish on SIGTERM"},
			&cli.Int64Flag{Name: "min-body-rate", Value: 16 << 10, Usage: "slowest a request body may come in bytes/s, after its first 2s (408 below it)"},
			deviceFlag, threadsFlag,
		}, append(maskColourFlags(), preprocessFlags()...)...),
		Action: runServe,
	}
}

// serveFlags are the flags of serve.Options' fields.
var serveFlags = map[string]string{"MaxBatch": "max-batch", "MaxBodyBytes": "max-body", "MaxPixels": "max-pixels", "MaxConns": "max-conns",
	"MaxPending": "max-pending", "ReadTimeout": "read-timeout", "WriteTimeout": "write-timeout", "ShutdownTimeout": "shutdown-timeout", "MinBodyRate": "min-body-rate"}

func runServe(c *cli.Context) error {
	opts := serve.Options{MaxBatch: c.Int("max-batch"), BatchWait: c.Duration("batch-wait"),
		MaxBodyBytes: c.Int64("max-body"), MaxPixels: c.Int64("max-pixels"), MaxPending: c.Int("max-pending"), MaxConns: c.Int("max-conns"),
		ReadTimeout: c.Duration("read-timeout"), WriteTimeout: c.Duration("write-timeout"), ShutdownTimeout: c.Duration("shutdown-timeout"),
		MinBodyRate: c.Int64("min-body-rate"),
		Overlay:     imageio.OverlayOptions{Alpha: c.Float64("overlay-alpha"), Skip: []uint8{0}}}
	var se *serve.SettingError
	if err := opts.Check(); errors.As(err, &se) {
		return fmt.Errorf("--%s %s", serveFlags[se.Field], se.Problem)
	}
	if err := checkListenAddr(c.String("addr")); err != nil {
		return err
	}
	if err := initRuntime(c); err != nil {
		return err
	}
	modelPath := c.String("model")
	settings, err := modelSettings(c, modelPath)
	if err != nil {
		return err
	}
	if opts.Palette, err = outputPalette(c, settings); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.String("addr"))
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	defer ln.Close()
	seg, err := openSegmenter(c, modelPath, settings)
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
	notef(c, "segtune: serving %s on http://%s (%s)", modelPath, ln.Addr(), seg.Session.Device)
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
