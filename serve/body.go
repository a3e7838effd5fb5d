package serve

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/segtune/segtune/internal/memlimit"
)

// bodyChunk is the step a body's buffer grows by at first, and the
// smallest charge to the body budget.
const bodyChunk = 64 << 10

// bodyGrace is how long a body may take before MinBodyRate applies: a
// connection's first bytes are slow to come (TCP slow start, a client
// still encoding).
const bodyGrace = 2 * time.Second

// readBody reads r's body into memory, before the request takes a place
// among those handled (MaxPending): a body that comes slowly holds no place
// a finished request could use. The buffer is charged to the body budget
// as it grows, so slow senders hold only what they have sent, and all
// bodies together stay within the budget (503 past it). A sender slower
// than MinBodyRate after bodyGrace, or not done by the read timeout or
// deadline, gets 408. release returns the charge.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, start, deadline time.Time) (body []byte, release func(), herr *httpError) {
	rc := http.NewResponseController(w)
	limit := s.opt.MaxBodyBytes
	hard := earlier(start.Add(s.opt.ReadTimeout), deadline)
	var charged int64
	release = func() { s.bodies.sem.Release(charged) }
	defer func() {
		if herr != nil {
			// The deadline stays: the server discards what is left of
			// the body after the answer, and must not wait for it.
			release()
			return
		}
		rc.SetReadDeadline(time.Time{}) // the server's own read past the body must not end the request
	}()
	grow := func(n int64) *httpError {
		if !s.bodies.sem.TryAcquire(n) {
			return fail(http.StatusServiceUnavailable, "the server is busy receiving other request bodies (%s of memory for bodies, %s); retry",
				memlimit.Human(s.bodies.size), s.bodies.from)
		}
		charged += n
		return nil
	}
	size := int64(bodyChunk)
	if r.ContentLength > 0 {
		size = min(r.ContentLength, size)
	}
	if herr := grow(size); herr != nil {
		return nil, release, herr
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			next := min(2*int64(cap(buf)), limit+1)
			if r.ContentLength > 0 {
				next = min(next, r.ContentLength+1) // one more byte to see the end
			}
			if herr := grow(next - int64(cap(buf))); herr != nil {
				return nil, release, herr
			}
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		// The sender must have sent MinBodyRate bytes a second since
		// bodyGrace: the next byte is due when the bytes in fall behind.
		due := start.Add(bodyGrace + time.Duration(float64(len(buf))/float64(s.opt.MinBodyRate)*float64(time.Second)))
		rc.SetReadDeadline(earlier(due, hard))
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, release, fail(http.StatusRequestEntityTooLarge, "the body is over the limit of %d bytes", limit)
		}
		if errors.Is(err, io.EOF) {
			return buf, release, nil
		}
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			if due.Before(hard) {
				return nil, release, fail(http.StatusRequestTimeout, "the body came slower than %d bytes/s (%d bytes in %v)",
					s.opt.MinBodyRate, len(buf), time.Since(start).Round(time.Millisecond))
			}
			return nil, release, fail(http.StatusRequestTimeout, "the body was not received in time")
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, release, fail(http.StatusRequestEntityTooLarge, "the body is over the limit of %d bytes", limit)
		}
		return nil, release, fail(http.StatusBadRequest, "reading the body: %v", err)
	}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
