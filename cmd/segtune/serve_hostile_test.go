package main

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segtune/segtune/runtime/runtimetest"
)

// smallPNG is a 200×150 PNG with varied pixels.
func smallPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 200, 150))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 31)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// slowBodies opens n connections that send a request's headers and the
// first bytes of its body, and no more; they are closed when the test ends.
func slowBodies(t *testing.T, addr string, n int, body []byte) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /v1/segment HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body))
		c.Write(body[:10])
		conns = append(conns, c)
	}
	return conns
}

// Connections that never finish their bodies take no place among the
// requests handled (--max-pending): finished requests are served beside
// them. They once took those places before reading, and 16 of them made
// every request 503 for the whole read timeout.
func TestServeSlowBodiesDoNotLockOut(t *testing.T) {
	runtimetest.Require(t)
	model := redModel(t, t.TempDir())
	base, stop := startServe(t, "--model", model, "--max-pending", "4", "--read-timeout", "30s", "--min-body-rate", "1")
	good := smallPNG(t)
	slow := slowBodies(t, strings.TrimPrefix(base, "http://"), 16, good)
	time.Sleep(300 * time.Millisecond) // the server is reading their bodies
	var wg sync.WaitGroup
	for range 2 { // under --max-pending, which a client's next request may meet before its last one's place is free
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if code, b := post(t, base, "", good); code != http.StatusOK {
					t.Errorf("beside 16 slow bodies: %d %s", code, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, c := range slow {
		c.Close() // else the shutdown waits for them
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A body slower than --min-body-rate is answered 408 once its grace (2s)
// is over, not at the end of --read-timeout: slow senders do not hold
// the connections (--max-conns) for long.
func TestServeRefusesBodiesBelowTheRateFloor(t *testing.T) {
	runtimetest.Require(t)
	model := redModel(t, t.TempDir())
	base, stop := startServe(t, "--model", model, "--read-timeout", "60s", "--min-body-rate", "1000")
	conns := slowBodies(t, strings.TrimPrefix(base, "http://"), 4, smallPNG(t))
	for _, c := range conns {
		if code := rawStatus(t, c); code != http.StatusRequestTimeout { // rawStatus fails after 10s
			t.Errorf("a body below the rate floor: %d, want 408", code)
		}
	}
	// A client can read its 408 before the handler that wrote it returns
	// and counts it: the count is awaited, within a bound.
	var metrics string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		metrics = get(t, base+"/metrics")
		if strings.Contains(metrics, `segtune_requests_total{code="408"} 4`) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(metrics, `segtune_requests_total{code="408"} 4`) {
		t.Errorf("/metrics does not count the four 408s:\n%s", metrics)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A request not answered within --write-timeout gets a 503 saying so,
// and /metrics counts it as a 503: it was dropped without an answer and
// counted as 200. Batches gathered for 3s hold it past a 500ms timeout.
func TestServeAnswersTheWriteTimeout(t *testing.T) {
	runtimetest.Require(t)
	model := redModel(t, t.TempDir())
	base, stop := startServe(t, "--model", model, "--max-batch", "4", "--batch-wait", "3s", "--write-timeout", "500ms")
	t0 := time.Now()
	code, b := post(t, base, "", smallPNG(t))
	if code != http.StatusServiceUnavailable || !strings.Contains(string(b), "write timeout") {
		t.Errorf("past the write timeout: %d %q, want 503 naming the write timeout", code, b)
	}
	if d := time.Since(t0); d > 2500*time.Millisecond {
		t.Errorf("answered after %v, past the batch wait: the timeout did not end the wait", d)
	}
	metrics := get(t, base+"/metrics")
	if !strings.Contains(metrics, `segtune_requests_total{code="503"} 1`) || strings.Contains(metrics, `segtune_requests_total{code="200"}`) {
		t.Errorf("/metrics does not count one 503 and no 200:\n%s", metrics)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// An --addr that is empty (--addr "$ADDR" with ADDR unset), not host:port
// or without a port is refused naming the flag, before the model is read:
// "" once listened on every interface, on a random port.
func TestServeRefusesBadAddr(t *testing.T) {
	for _, addr := range []string{"", "localhost", "127.0.0.1:", "[::1"} {
		_, err := runCLIWithin(t, 30*time.Second, "serve", "--model", "no-such-model.onnx", "--addr", addr)
		if err == nil || !strings.Contains(err.Error(), "--addr") {
			t.Errorf("--addr %q: %v, want an error naming --addr", addr, err)
		}
	}
}

// An image whose header says it would need more than serve's share of
// the memory limit (decoding, segment's estimate of the model run, the
// answer) is refused with 413 saying so, before a pixel is decoded, as
// segment refuses it; images within it are served, several at once
// waiting for their share. serve once ran such 2900×2900 images, and died
// of them under an address-space limit.
func TestServeRefusesImagesOverTheMemoryBudget(t *testing.T) {
	runtimetest.Require(t)
	t.Setenv("SEGTUNE_MAX_MEMORY", "600M") // serve's share: 300M
	model := redModel(t, t.TempDir())
	base, stop := startServe(t, "--model", model)
	b := loadBodies(t)
	code, msg := post(t, base, "", b.bomb)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(string(msg), "2900x2900") || !strings.Contains(string(msg), "memory limit") {
		t.Errorf("a 2900×2900 image over the budget: %d %.200q, want 413 naming its size and the memory limit", code, msg)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, msg := post(t, base, "?overlay=1", b.mid); code != http.StatusOK {
				t.Errorf("a 1200×1200 image within the budget: %d %s", code, msg)
			}
		}()
	}
	wg.Wait()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
