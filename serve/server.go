// Package serve answers segmentation requests over HTTP: POST /v1/segment
// takes an image and returns its mask (a palette PNG, the same bytes
// `segtune segment` writes), an overlay or a JSON summary; GET /healthz and
// GET /metrics (Prometheus, through client_golang) report on the server. Concurrent
// requests are batched into one model run.
package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
)

// Options tune a Server; zero fields take the defaults below.
type Options struct {
	MaxBatch  int           // images per model run (default 1, capped at a fixed model batch)
	BatchWait time.Duration // how long the first request of a batch waits for more (default 5ms)
	// MaxBodyBytes is the largest request body (default 32 MiB): 413 over it.
	MaxBodyBytes int64
	// MaxPixels is the most pixels an image's header may declare (default
	// 40 million): 413 over it, checked before any pixel is decoded.
	MaxPixels int64
	// MaxPending is how many segment requests are handled at once (default
	// 4×MaxBatch, at least 8); more get 503.
	MaxPending int
	// MaxConns is how many connections are open at once (default 256); more get 503.
	MaxConns     int
	ReadTimeout  time.Duration // to read a request, headers and body (default 30s): 408 after it
	WriteTimeout time.Duration // to answer a request once its headers are read (default 60s)
	// ShutdownTimeout bounds the drain of in-flight requests (default 30s).
	ShutdownTimeout time.Duration
	Palette         imageio.Palette
	Classes         []string // class names for JSON answers, in label order; may be empty
	Overlay         imageio.OverlayOptions
}

func (o Options) withDefaults() Options {
	o.MaxBatch = max(o.MaxBatch, 1)
	if o.BatchWait <= 0 {
		o.BatchWait = 5 * time.Millisecond
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 32 << 20
	}
	if o.MaxPixels <= 0 {
		o.MaxPixels = 40_000_000
	}
	if o.MaxPending <= 0 {
		o.MaxPending = max(4*o.MaxBatch, 8)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 256
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 60 * time.Second
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	return o
}

// Server serves one segmenter.
type Server struct {
	seg     *inference.Segmenter
	opt     Options
	dec     imageio.Decoder
	batch   *batcher
	pending chan struct{} // a slot per request being handled
	metrics *metrics
	mux     *http.ServeMux
}

// New starts the batcher for seg; Close (or Serve's return) stops it.
func New(seg *inference.Segmenter, opt Options) *Server {
	opt = opt.withDefaults()
	opt.MaxBatch = seg.BatchFor(opt.MaxBatch)
	s := &Server{seg: seg, opt: opt, dec: imageio.Decoder{MaxPixels: opt.MaxPixels},
		pending: make(chan struct{}, opt.MaxPending), metrics: newMetrics(), mux: http.NewServeMux()}
	s.batch = newBatcher(seg, opt.MaxBatch, opt.MaxPending, opt.BatchWait, s.metrics.batch)
	s.mux.HandleFunc("POST /v1/segment", s.segment)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /metrics", s.metrics.handler())
	return s
}

// Handler is the server's routes, for tests and embedding.
func (s *Server) Handler() http.Handler { return s.mux }

// Close stops the batcher; requests still waiting for it are answered first.
func (s *Server) Close() { s.batch.close() }

// Serve answers requests on ln until ctx is done, then stops accepting,
// lets in-flight requests finish (up to ShutdownTimeout) and returns.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: min(s.opt.ReadTimeout, 10*time.Second),
		ReadTimeout:       s.opt.ReadTimeout,
		WriteTimeout:      s.opt.WriteTimeout,
		IdleTimeout:       2 * s.opt.ReadTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(&limitListener{Listener: ln, max: int64(s.opt.MaxConns)}) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), s.opt.ShutdownTimeout)
		err = hs.Shutdown(sctx)
		cancel()
		if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
			err = e
		}
	}
	s.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"status": "ok", "device": s.seg.Session.Device,
		"classes": s.seg.Contract.Classes, "max_batch": s.opt.MaxBatch})
}

// httpError is a failed request's status and message.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func fail(status int, format string, args ...any) *httpError {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) segment(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.metrics.begin()
	status := http.StatusOK
	if err := s.answer(w, r); err != nil {
		status = err.status
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		if status == http.StatusRequestEntityTooLarge || status == http.StatusRequestTimeout {
			w.Header().Set("Connection", "close") // the rest of the body is not read
		}
		http.Error(w, "segtune: "+err.msg, status)
	}
	s.metrics.end(status, time.Since(start))
}

// response formats of /v1/segment.
const (
	formatMask    = "mask"
	formatOverlay = "overlay"
	formatJSON    = "json"
)

func responseFormat(r *http.Request) (string, *httpError) {
	q := r.URL.Query()
	f := q.Get("format")
	if f == "" && strings.Contains(r.Header.Get("Accept"), "application/json") {
		f = formatJSON
	}
	if v := q.Get("overlay"); v == "1" || v == "true" {
		if f == formatJSON {
			return "", fail(http.StatusBadRequest, "?overlay is a PNG answer; it does not go with JSON")
		}
		f = formatOverlay
	}
	switch f {
	case "", formatMask:
		return formatMask, nil
	case formatOverlay, formatJSON:
		return f, nil
	}
	return "", fail(http.StatusBadRequest, "unknown ?format=%q (mask, overlay or json)", f)
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request) *httpError {
	format, herr := responseFormat(r)
	if herr != nil {
		return herr
	}
	select {
	case s.pending <- struct{}{}:
		defer func() { <-s.pending }()
	default:
		return fail(http.StatusServiceUnavailable, "the server is busy (%d requests in progress); retry", s.opt.MaxPending)
	}
	if r.ContentLength > s.opt.MaxBodyBytes {
		return fail(http.StatusRequestEntityTooLarge, "the body is %d bytes; the limit is %d", r.ContentLength, s.opt.MaxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes))
	if err != nil {
		return readError(err, s.opt.MaxBodyBytes)
	}
	if len(body) == 0 {
		return fail(http.StatusBadRequest, "the body is empty; send the image's bytes (PNG, JPEG, …)")
	}
	img, err := s.dec.Decode(bytes.NewReader(body), "request body")
	if errors.Is(err, imageio.ErrTooLarge) {
		return fail(http.StatusRequestEntityTooLarge, "%v", err)
	}
	if err != nil {
		return fail(http.StatusBadRequest, "%v", err)
	}
	item, err := s.seg.Prepare(img)
	if err != nil {
		return fail(http.StatusBadRequest, "%v", err)
	}
	out, err := s.batch.submit(item)
	if errors.Is(err, errQueueFull) {
		s.seg.Recycle(item.Input)
		return fail(http.StatusServiceUnavailable, "%v", err)
	}
	if err != nil {
		return fail(http.StatusInternalServerError, "running the model: %v", err)
	}
	labels, err := s.seg.Labels(item, out)
	if err != nil {
		return fail(http.StatusInternalServerError, "%v", err)
	}
	b := img.Bounds()
	return s.write(w, format, img, labels, b.Dx(), b.Dy())
}

// readError maps a failed body read to its status: too large, too slow, or
// cut short.
func readError(err error, limit int64) *httpError {
	var tooBig *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &tooBig):
		return fail(http.StatusRequestEntityTooLarge, "the body is over the limit of %d bytes", limit)
	case errors.As(err, &ne) && ne.Timeout():
		return fail(http.StatusRequestTimeout, "the body was not received in time")
	}
	return fail(http.StatusBadRequest, "reading the body: %v", err)
}

// classCount is one class in a JSON answer.
type classCount struct {
	Label  int    `json:"label"`
	Name   string `json:"name,omitempty"`
	Pixels int    `json:"pixels"`
}

// segmentJSON is the JSON answer: the mask's size, the pixels of each
// class present, and the mask PNG itself (base64).
type segmentJSON struct {
	Width   int          `json:"width"`
	Height  int          `json:"height"`
	Classes []classCount `json:"classes"`
	MaskPNG string       `json:"mask_png"`
}

func (s *Server) write(w http.ResponseWriter, format string, img image.Image, labels []uint8, width, height int) *httpError {
	var png bytes.Buffer
	var err error
	if format == formatOverlay {
		var ov *image.RGBA
		if ov, err = imageio.Overlay(img, labels, s.opt.Palette, s.opt.Overlay); err == nil {
			err = imageio.EncodeOutputPNG(&png, ov)
		}
	} else {
		var mask *image.Paletted
		if mask, err = imageio.MaskImage(labels, width, height, s.opt.Palette); err == nil {
			err = imageio.EncodeOutputPNG(&png, mask)
		}
	}
	if err != nil {
		return fail(http.StatusInternalServerError, "encoding the answer: %v", err)
	}
	if format != formatJSON {
		w.Header().Set("Content-Type", "image/png")
		w.Write(png.Bytes())
		return nil
	}
	var counts [256]int
	for _, l := range labels {
		counts[l]++
	}
	ans := segmentJSON{Width: width, Height: height, Classes: []classCount{}, MaskPNG: base64.StdEncoding.EncodeToString(png.Bytes())}
	for l, n := range counts {
		if n == 0 {
			continue
		}
		c := classCount{Label: l, Pixels: n}
		if l < len(s.opt.Classes) {
			c.Name = s.opt.Classes[l]
		}
		ans.Classes = append(ans.Classes, c)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(ans)
	return nil
}
