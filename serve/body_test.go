package serve

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Bodies are charged to their budget as they come: a sender holds what it
// has sent, not what it declares; a body that finds the budget taken gets
// 503, and a finished or refused body gives its charge back.
func TestBodiesShareTheirBudget(t *testing.T) {
	s := &Server{opt: Options{MaxBodyBytes: 500_000}.withDefaults(), bodies: newBudget(600<<10, "test")}
	read := func(body io.Reader, length int64) ([]byte, func(), *httpError) {
		r := httptest.NewRequest(http.MethodPost, "/v1/segment", body)
		r.ContentLength = length
		return s.readBody(httptest.NewRecorder(), r, time.Now(), time.Now().Add(time.Minute))
	}
	// A sender that declares 500 KB and has sent 200 KB holds 256 KiB.
	pr, pw := io.Pipe()
	type res struct {
		body []byte
		herr *httpError
	}
	slow := make(chan res, 1)
	var releaseSlow func()
	go func() {
		b, release, herr := read(pr, 500_000)
		releaseSlow = release
		slow <- res{b, herr}
	}()
	pw.Write(bytes.Repeat([]byte("x"), 200_000))
	// A 400 KB body does not fit beside it.
	if _, _, herr := read(bytes.NewReader(make([]byte, 400_000)), 400_000); herr == nil || herr.status != http.StatusServiceUnavailable ||
		!strings.Contains(herr.msg, "bodies") {
		t.Fatalf("a body beside one holding most of the budget: %v, want 503", herr)
	}
	go func() { // in the background: a refused reader reads no more
		pw.Write(bytes.Repeat([]byte("x"), 100_000))
		pw.Close()
	}()
	if r := <-slow; r.herr != nil || len(r.body) != 300_000 {
		t.Fatalf("the slow body: %d bytes, %v; want its 300 KB", len(r.body), r.herr)
	}
	releaseSlow()
	// Its charge is back: a 250 KB body fits, and so does the next once
	// that one is released.
	for range 2 {
		b, release, herr := read(bytes.NewReader(make([]byte, 250_000)), 250_000)
		if herr != nil || len(b) != 250_000 {
			t.Fatalf("a body within the budget: %d bytes, %v", len(b), herr)
		}
		release()
	}
	// Over MaxBodyBytes without a declared length: 413, charge returned.
	if _, _, herr := read(io.LimitReader(zeros{}, 1<<20), -1); herr == nil || herr.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body over the limit: %v, want 413", herr)
	}
	if !s.bodies.sem.TryAcquire(s.bodies.size) {
		t.Fatal("refused bodies kept their charge")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
