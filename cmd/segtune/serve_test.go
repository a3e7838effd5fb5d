package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// startServe runs `segtune serve` on a free loopback port until the test
// ends (or stop is called) and returns its base URL and stop, which
// cancels it (as SIGTERM would) and returns its error.
func startServe(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- newApp().RunContext(ctx, append([]string{"segtune", "--quiet", "serve", "--addr", addr}, args...))
	}()
	base := "http://" + addr
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(60 * time.Second):
				stopErr = fmt.Errorf("serve did not stop within a minute")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { stop() })
	for deadline := time.Now().Add(60 * time.Second); ; {
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v", err)
		default:
		}
		if r, err := http.Get(base + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return base, stop
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("serve did not answer /healthz within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// post sends body to /v1/segment with query q and returns the status and
// answer.
// freshClient opens a connection per request. The hostile-request test
// stalls for longer than the server's idle timeout (twice --read-timeout),
// so a kept-alive connection may be closed by the server just as the client
// reuses it, and a POST is not retried on one: the request would fail with
// EOF for a reason that is the test's, not the server's.
var freshClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func post(t *testing.T, base, q string, body []byte) (int, []byte) {
	t.Helper()
	r, err := freshClient.Post(base+"/v1/segment"+q, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", q, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return r.StatusCode, b
}

// photoFolder writes n w×h images with varied content (gradients and
// blocks, so that a real model gives several classes), PNGs and JPEGs, in
// dir/in, and returns the folder and the paths.
func photoFolder(t *testing.T, dir string, n, w, h int) (string, []string) {
	t.Helper()
	in := filepath.Join(dir, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, w+i%3, h+i%2)) // some sizes differ: their own batches
		b := img.Bounds()
		for y := 0; y < b.Dy(); y++ {
			for x := 0; x < b.Dx(); x++ {
				v := uint8((x*7 + y*3 + i*40) % 256)
				if (x/16+y/16+i)%3 == 0 {
					v = 255 - v
				}
				img.Set(x, y, color.RGBA{v, uint8((y * 5) % 256), uint8(255 - v/2), 255})
			}
		}
		var buf bytes.Buffer
		p := filepath.Join(in, fmt.Sprintf("img%02d.png", i))
		if i%2 == 1 {
			p = strings.TrimSuffix(p, ".png") + ".jpg"
			jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
		} else {
			png.Encode(&buf, img)
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return in, paths
}

func TestServeMasksMatchSegment(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Generated(t, "deeplabv3plus_mobilenetv2.onnx")
	dir := t.TempDir()
	in, paths := photoFolder(t, dir, 6, 96, 72)
	out := filepath.Join(dir, "out")
	if _, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", out, "--overlay", "--threads", "2"); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, "--model", model, "--threads", "2", "--max-batch", "4", "--batch-wait", "20ms")
	type answer struct {
		mask, overlay, js []byte
	}
	answers := make([]answer, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths { // concurrently, so that batches form
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := os.ReadFile(p)
			if err != nil {
				t.Error(err)
				return
			}
			for _, q := range []string{"", "?overlay=1", "?format=json"} {
				code, b := post(t, base, q, body)
				if code != http.StatusOK {
					t.Errorf("%s%s: %d %s", p, q, code, b)
					return
				}
				switch q {
				case "":
					answers[i].mask = b
				case "?overlay=1":
					answers[i].overlay = b
				default:
					answers[i].js = b
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	var classes []int
	for i, p := range paths {
		name := folder.Stem(p) + ".png"
		want, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(answers[i].mask, want) {
			t.Errorf("%s: the served mask (%d bytes) differs from segment's (%d bytes)", p, len(answers[i].mask), len(want))
		}
		wantOv, err := os.ReadFile(filepath.Join(out, "overlays", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(answers[i].overlay, wantOv) {
			t.Errorf("%s: the served overlay differs from segment's", p)
		}
		var js struct {
			Width, Height int
			Classes       []struct{ Label, Pixels int }
			MaskPNG       string `json:"mask_png"`
		}
		if err := json.Unmarshal(answers[i].js, &js); err != nil {
			t.Fatalf("%s: JSON %q: %v", p, answers[i].js, err)
		}
		if m, _ := base64.StdEncoding.DecodeString(js.MaskPNG); !bytes.Equal(m, want) {
			t.Errorf("%s: the JSON's mask differs from segment's", p)
		}
		mask, err := imageio.ReadMask(filepath.Join(out, name), imageio.MaskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		counts := map[int]int{}
		for _, l := range mask.Labels {
			counts[int(l)]++
		}
		if js.Width != mask.Width || js.Height != mask.Height || len(js.Classes) != len(counts) {
			t.Errorf("%s: JSON %dx%d with %v; mask %dx%d with %v", p, js.Width, js.Height, js.Classes, mask.Width, mask.Height, counts)
		}
		for _, c := range js.Classes {
			if counts[c.Label] != c.Pixels {
				t.Errorf("%s: JSON says label %d has %d pixels; the mask has %d", p, c.Label, c.Pixels, counts[c.Label])
			}
			if !slices.Contains(classes, c.Label) {
				classes = append(classes, c.Label)
			}
		}
	}
	if len(classes) < 2 {
		t.Errorf("every image was one class (%v): the comparison shows little", classes)
	}
	metrics := get(t, base+"/metrics")
	for _, want := range []string{`segtune_requests_total{code="200"} 18`, "# TYPE segtune_batch_size histogram", "segtune_requests_in_flight 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	r, err := freshClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, r.StatusCode, b)
	}
	return string(b)
}

// hugePNG returns a valid PNG header (signature, IHDR with its CRC)
// declaring w×h pixels, and no pixel data.
func hugePNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], w)
	binary.BigEndian.PutUint32(ihdr[8:], h)
	ihdr[12], ihdr[13] = 8, 2 // 8-bit RGB
	binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(ihdr)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(ihdr))
	return b.Bytes()
}

// rawStatus reads the status line of an HTTP answer on c (0 if the server
// closed the connection without one), waiting at most 10s.
func rawStatus(t *testing.T, c net.Conn) int {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("no answer within 10s")
		}
		return 0
	}
	var code int
	fmt.Sscanf(line, "HTTP/1.1 %d", &code)
	return code
}

// connectionBurst opens n connections to addr at once and counts those
// after the first limit that are refused with 503; stale reports that one
// of the first limit was refused too (the server still counted an earlier
// connection).
func connectionBurst(t *testing.T, addr string, n, limit int) (busy int, stale bool) {
	t.Helper()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns[limit:] {
		if rawStatus(t, c) == http.StatusServiceUnavailable {
			busy++
		}
	}
	// A refusal is written at once; an accepted connection says nothing
	// until the server's read timeout closes it.
	for _, c := range conns[:limit] {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if line, _ := bufio.NewReader(c).ReadString('\n'); strings.HasPrefix(line, "HTTP/1.1 503") {
			stale = true
		}
	}
	return busy, stale
}

func TestServeHostileRequests(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	base, stop := startServe(t, "--model", model, "--max-body", "100000", "--max-pixels", "1000000",
		"--read-timeout", "1s", "--max-conns", "6", "--max-pending", "2")
	addr := strings.TrimPrefix(base, "http://")
	var good bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 200, 150))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 31)
	}
	png.Encode(&good, img)
	ok := func() {
		t.Helper()
		if code, b := post(t, base, "", good.Bytes()); code != http.StatusOK {
			t.Fatalf("a good request after the hostile ones: %d %s", code, b)
		}
	}
	ok()
	cases := []struct {
		name string
		body []byte
		want int
	}{
		{"huge body", bytes.Repeat([]byte("x"), 200_000), http.StatusRequestEntityTooLarge},
		{"truncated image", good.Bytes()[:good.Len()/2], http.StatusBadRequest},
		{"not an image", []byte("hello, this is not an image"), http.StatusBadRequest},
		{"empty body", nil, http.StatusBadRequest},
		{"huge declared dimensions", hugePNG(100_000, 100_000), http.StatusRequestEntityTooLarge},
	}
	for _, tc := range cases {
		if tc.want == http.StatusRequestEntityTooLarge && len(tc.body) > 100_000 {
			// The server answers 413 once it has read --max-body and then
			// closes; a client still writing the rest may see the close
			// (broken pipe, reset) before the answer: a refusal as well.
			r, err := freshClient.Post(base+"/v1/segment", "application/octet-stream", bytes.NewReader(tc.body))
			if err == nil {
				b, _ := io.ReadAll(r.Body)
				r.Body.Close()
				if r.StatusCode != tc.want || !strings.HasPrefix(string(b), "segtune: ") {
					t.Errorf("%s: %d %q, want %d with a message", tc.name, r.StatusCode, b, tc.want)
				}
			} else if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("%s: %v, want 413 or the connection closed", tc.name, err)
			}
			ok()
			continue
		}
		code, b := post(t, base, "", tc.body)
		if code != tc.want || !strings.HasPrefix(string(b), "segtune: ") {
			t.Errorf("%s: %d %q, want %d with a message", tc.name, code, b, tc.want)
		}
		ok()
	}
	// A huge body sent in chunks, without a Content-Length.
	r, err := freshClient.Post(base+"/v1/segment", "image/png", io.MultiReader(bytes.NewReader(good.Bytes()), strings.NewReader(strings.Repeat("x", 300_000))))
	if err == nil {
		r.Body.Close()
		if r.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked huge body: %d, want 413", r.StatusCode)
		}
	} // else the server closed before reading it all: also a refusal
	if code, _ := post(t, base, "?format=bogus", good.Bytes()); code != http.StatusBadRequest {
		t.Errorf("?format=bogus: %d, want 400", code)
	}

	// A slow body: the headers, then a trickle; 408 after --read-timeout.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "POST /v1/segment HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", good.Len())
	c.Write(good.Bytes()[:10])
	if code := rawStatus(t, c); code != http.StatusRequestTimeout {
		t.Errorf("slow body: status %d, want 408", code)
	}
	c.Close()
	// Slow headers (slowloris): the connection is closed.
	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "POST /v1/segment HTTP/1.1\r\nHost: x\r\n")
	if code := rawStatus(t, c); code != 0 && code != http.StatusRequestTimeout {
		t.Errorf("slow headers: status %d, want a closed connection", code)
	}
	c.Close()
	ok()

	// Many connections: those over --max-conns get 503 at once. The
	// server releases the connections closed above asynchronously: a
	// burst in which one of the first six was refused met one of them
	// still counted, and is tried again.
	busy, stale := connectionBurst(t, addr, 10, 6)
	for try := 0; stale && try < 5; try++ {
		time.Sleep(200 * time.Millisecond)
		busy, stale = connectionBurst(t, addr, 10, 6)
	}
	if stale || busy != 4 {
		t.Errorf("%d of 4 connections over the limit got 503 (one under it refused: %v)", busy, stale)
	}
	// The server closes its side of the refused and closed connections
	// asynchronously: retry the good request briefly.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r, err := freshClient.Post(base+"/v1/segment", "image/png", bytes.NewReader(good.Bytes()))
		if err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not recover from many connections: %v", err)
		}
	}
	metrics := get(t, base+"/metrics")
	for _, want := range []string{`segtune_requests_total{code="413"} `, `segtune_requests_total{code="400"} `, `segtune_requests_total{code="408"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// A request in flight when the server is told to stop is answered before
// it stops; new connections are refused.
func TestServeDrainsOnShutdown(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	base, stop := startServe(t, "--model", model)
	var good bytes.Buffer
	png.Encode(&good, image.NewRGBA(image.Rect(0, 0, 40, 30)))
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/segment HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", good.Len())
	c.Write(good.Bytes()[:20])
	time.Sleep(100 * time.Millisecond) // the server is reading the body
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(200 * time.Millisecond) // the server is shutting down
	select {
	case err := <-stopped:
		t.Fatalf("serve stopped with a request in flight: %v", err)
	default:
	}
	c.Write(good.Bytes()[20:])
	if code := rawStatus(t, c); code != http.StatusOK {
		t.Errorf("the in-flight request got %d, want 200", code)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the stopped server still answers")
	}
}

// TestServeLoad logs the throughput and latency of serve under
// concurrent clients beside `segment` on the same images at the same
// threads. It asserts only that every request succeeds: timings on a
// shared machine are reported, not tested.
func TestServeLoad(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Generated(t, "deeplabv3plus_mobilenetv2.onnx")
	dir := t.TempDir()
	const images, clients, rounds = 16, 8, 2
	in, paths := photoFolder(t, dir, images, 256, 192)
	out, err := runCLI(t, "segment", "--model", model, "--input", in, "--output", filepath.Join(dir, "out"), "--threads", "2", "--batch", "4", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sum folder.Summary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	base, stop := startServe(t, "--model", model, "--threads", "2", "--max-batch", "4", "--batch-wait", "10ms", "--max-pending", "16")
	bodies := make([][]byte, len(paths))
	for i, p := range paths {
		if bodies[i], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	post(t, base, "", bodies[0]) // warm up, like segment's probe run
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for k := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < images*rounds; i += clients {
				t0 := time.Now()
				code, b := post(t, base, "", bodies[i%images])
				d := time.Since(t0)
				if code != http.StatusOK {
					t.Errorf("%d %s", code, b)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		return
	}
	slices.Sort(lat)
	served := float64(len(lat)) / elapsed.Seconds()
	t.Logf("segment (in-process, --threads 2 --batch 4): %d images, %.2f images/s", sum.Succeeded, sum.ImagesPerSec)
	t.Logf("serve (%d clients, --threads 2 --max-batch 4): %d requests, %.2f images/s, p50 %v, p99 %v; ratio %.2f×",
		clients, len(lat), served, lat[len(lat)/2].Round(time.Millisecond), lat[(len(lat)*99)/100].Round(time.Millisecond), served/sum.ImagesPerSec)
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
