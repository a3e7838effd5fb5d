package serve

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
)

// Request is a server as its user asks for it: the server's options,
// where it listens and how its masks are coloured.
type Request struct {
	Options
	Addr  string  // host:port (CheckAddr)
	Alpha float64 // the overlays' opacity
	// Palette is a palette image to colour the masks; "" is the model's
	// settings' palette (imageio.Sidecar.MaskPalette).
	Palette string
	// Signals stop the server, which drains the requests in flight (a
	// program's SIGTERM and SIGINT).
	Signals []os.Signal
	// Notes receives notices ("segtune: " lines; nil: none); Name calls a
	// setting what the user knows it by in them (nil: by its key).
	Notes io.Writer
	Name  func(key string) string
}

// Check refuses, before any work, options no server runs with
// (Options.Check) and an address that is not host:port (CheckAddr).
func (r Request) Check() error {
	if err := r.Options.Check(); err != nil {
		return err
	}
	return CheckAddr(r.Addr)
}

// Run serves the model that open opens, whose settings are settings,
// until ctx ends or a signal of r.Signals comes. A palette that cannot be
// read or an address that cannot be listened on fails before the model
// is opened; the model's fixed batch size caps MaxBatch (noted).
func (r Request) Run(ctx context.Context, settings imageio.Sidecar, open func() (*inference.Segmenter, error)) error {
	if r.Notes == nil {
		r.Notes = io.Discard
	}
	if r.Name == nil {
		r.Name = setting.Key
	}
	opts := r.Options
	opts.Overlay = imageio.OverlayOptions{Alpha: r.Alpha, Skip: []uint8{0}}
	var err error
	if opts.Palette, err = settings.MaskPalette(r.Palette); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", r.Addr)
	if err != nil {
		return setting.Messagef("{addr}: %w", err)
	}
	defer ln.Close()
	seg, err := open()
	if err != nil {
		return err
	}
	defer seg.Close()
	if err := seg.CheckPalette(opts.Palette); err != nil {
		return err
	}
	opts.MaxBatch, opts.Classes = seg.FitBatch(opts.MaxBatch, r.Notes, r.Name), settings.Classes
	if len(r.Signals) > 0 { // none given is none, not Notify's every signal
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, r.Signals...)
		defer stop()
	}
	fmt.Fprintf(r.Notes, "segtune: serving %s on http://%s (%s)\n", seg.Name, ln.Addr(), seg.Session.Device)
	if err := New(seg, opts).Serve(ctx, ln); err != nil {
		return err
	}
	fmt.Fprintln(r.Notes, "segtune: stopped")
	return nil
}
