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
	"net"
	"net/http"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/memlimit"
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
	// 4×MaxBatch, at least 8), each taking its place once its body is in;
	// more get 503.
	MaxPending int
	// MaxConns is how many connections are open at once (default 256); more get 503.
	MaxConns    int
	ReadTimeout time.Duration // to read a request, headers and body (default 30s): 408 after it
	// WriteTimeout is the time to answer a request once its headers are
	// read (default 60s): a request still waiting for memory or the model
	// then gets 503, and its answer has 5s more to be written.
	WriteTimeout time.Duration
	// ShutdownTimeout bounds the drain of in-flight requests (default 30s).
	ShutdownTimeout time.Duration
	// MinBodyRate is the slowest a body may come, in bytes a second, once
	// its first 2 seconds have passed (default 16 KiB/s): 408 below it, so
	// that slow senders do not hold connections for the whole ReadTimeout.
	MinBodyRate int64
	// MaxMemory is the memory the requests being handled may take
	// together, from decoding to answer, as estimated from each image's
	// header before it is decoded (default half the memory limit of
	// internal/memlimit, $SEGTUNE_MAX_MEMORY): a request waits for its
	// share, and one that alone needs more gets 413.
	MaxMemory int64
	// BodyMemory is the memory the bodies being received or held may take
	// together (default an eighth of the memory limit, at least
	// MaxBodyBytes); a body that finds it taken gets 503.
	BodyMemory int64
	Palette    imageio.Palette
	Classes    []string // class names for JSON answers, in label order; may be empty
	Overlay    imageio.OverlayOptions
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
	if o.MinBodyRate <= 0 {
		o.MinBodyRate = 16 << 10
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
	work    *budget       // memory of the requests being handled (MaxMemory)
	bodies  *budget       // memory of the bodies being received or held (BodyMemory)
	metrics *metrics
	mux     *http.ServeMux
}

// New starts the batcher for seg; Close (or Serve's return) stops it.
func New(seg *inference.Segmenter, opt Options) *Server {
	opt = opt.withDefaults()
	opt.MaxBatch = seg.BatchFor(opt.MaxBatch)
	s := &Server{seg: seg, opt: opt, dec: imageio.Decoder{MaxPixels: opt.MaxPixels},
		pending: make(chan struct{}, opt.MaxPending), metrics: newMetrics(), mux: http.NewServeMux()}
	work, body, workFrom, bodyFrom := defaultBudgets(opt)
	s.work, s.bodies = newBudget(work, workFrom), newBudget(body, bodyFrom)
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
		WriteTimeout:      s.opt.WriteTimeout + answerGrace, // the handler answers by WriteTimeout itself

		IdleTimeout:    2 * s.opt.ReadTimeout,
		MaxHeaderBytes: 64 << 10,
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

// answerGrace is the time an answer has to be written once the handler
// has it: the handler stops waiting at WriteTimeout and answers 503, and
// the connection's write deadline is this much later.
const answerGrace = 5 * time.Second

// errAnswerDeadline is the cause of a request's context once WriteTimeout
// has passed.
var errAnswerDeadline = errors.New("the write timeout passed")

// answerWriter remembers whether the answer reached the connection, so
// that /metrics counts an answer the client never got as lost, not by
// its status.
type answerWriter struct {
	http.ResponseWriter
	failed bool
}

func (w *answerWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) segment(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.metrics.begin()
	w := &answerWriter{ResponseWriter: rw}
	ctx, cancel := context.WithDeadlineCause(r.Context(), start.Add(s.opt.WriteTimeout), errAnswerDeadline)
	defer cancel()
	status := http.StatusOK
	if err := s.answer(ctx, w, r.WithContext(ctx), start); err != nil {
		status = err.status
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		if status == http.StatusRequestEntityTooLarge || status == http.StatusRequestTimeout {
			w.Header().Set("Connection", "close") // the rest of the body is not read
		}
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerGrace))
		http.Error(w, "segtune: "+err.msg, status)
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		w.failed = true
	}
	s.metrics.end(status, time.Since(start), !w.failed)
}

func (s *Server) answer(ctx context.Context, w *answerWriter, r *http.Request, start time.Time) *httpError {
	format, herr := responseFormat(r)
	if herr != nil {
		return herr
	}
	if r.ContentLength > s.opt.MaxBodyBytes {
		return fail(http.StatusRequestEntityTooLarge, "the body is %d bytes; the limit is %d", r.ContentLength, s.opt.MaxBodyBytes)
	}
	deadline, _ := ctx.Deadline()
	body, releaseBody, herr := s.readBody(w, r, start, deadline)
	if herr != nil {
		return herr
	}
	defer releaseBody()
	if len(body) == 0 {
		return fail(http.StatusBadRequest, "the body is empty; send the image's bytes (PNG, JPEG, …)")
	}
	// A place among the requests handled is taken only now that the body
	// is in: slow senders cannot hold them all.
	select {
	case s.pending <- struct{}{}:
		defer func() { <-s.pending }()
	default:
		return fail(http.StatusServiceUnavailable, "the server is busy (%d requests in progress); retry", s.opt.MaxPending)
	}
	// The header says what decoding and running the image will take:
	// it is charged before a pixel is decoded.
	cfg, imgFormat, err := s.dec.Config(bytes.NewReader(body), "request body")
	if herr := imageError(err); herr != nil {
		return herr
	}
	need, shape, err := s.requestBytes(cfg, imgFormat, format)
	if herr := imageError(err); herr != nil {
		return herr
	}
	releaseWork, herr := s.reserve(ctx, need, fmt.Sprintf("segmenting a %dx%d %s image (model input %dx%d)", cfg.Width, cfg.Height, imgFormat, shape[2], shape[1]))
	if herr != nil {
		return herr
	}
	handedOver := false // to the batcher, with a request abandoned in its queue
	defer func() {
		if !handedOver {
			releaseWork()
		}
	}()
	img, err := s.dec.Decode(bytes.NewReader(body), "request body")
	if herr := imageError(err); herr != nil {
		return herr
	}
	item, err := s.seg.Prepare(img)
	if herr := imageError(err); herr != nil {
		return herr
	}
	out, err := s.batch.submit(ctx, item)
	var ab *abandonedError
	switch {
	case errors.Is(err, errQueueFull):
		s.seg.Recycle(item.Input)
		return fail(http.StatusServiceUnavailable, "%v", err)
	case errors.As(err, &ab):
		handedOver = true
		go func() { <-ab.done; releaseWork() }()
		if errors.Is(ab.cause, errAnswerDeadline) {
			return fail(http.StatusServiceUnavailable, "the server is busy: the model did not get to this image within the write timeout (%v); retry", s.opt.WriteTimeout)
		}
		return fail(http.StatusServiceUnavailable, "the request was abandoned while it waited for the model: %v", ab.cause)
	case err != nil:
		return fail(http.StatusInternalServerError, "running the model: %v", err)
	}
	if out.Release != nil {
		// The scores' buffer goes back for a later request's run once the
		// answer is written, as segment's pipeline gives it back after Finish.
		defer out.Release()
	}
	labels, err := s.seg.Labels(item, out)
	if err != nil {
		return fail(http.StatusInternalServerError, "%v", err)
	}
	b := img.Bounds()
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerGrace))
	return s.write(w, format, img, labels, b.Dx(), b.Dy())
}

// imageError maps an error reading or preparing the request's image to
// its status: 413 for an image over a size or memory limit, else 400.
func imageError(err error) *httpError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, imageio.ErrTooLarge), errors.Is(err, memlimit.ErrTooLarge):
		return fail(http.StatusRequestEntityTooLarge, "%v", err)
	}
	return fail(http.StatusBadRequest, "%v", err)
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
			err = imageio.EncodeOutputPNG(&png, ov, s.seg.MaskIdentity())
		}
	} else {
		var mask *image.Paletted
		if mask, err = imageio.MaskImage(labels, width, height, s.opt.Palette); err == nil {
			err = imageio.EncodeOutputPNG(&png, mask, s.seg.MaskIdentity())
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
