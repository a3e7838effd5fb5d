package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// TestServeSurvivesHostileLoad runs `segtune serve` as a child process
// under a memory bound (an address-space limit, then a cgroup's memory
// limit) and sends it, at once for a few seconds: connections that never
// finish their bodies, 2900×2900 PNGs of 30 KB (decompression bombs:
// one used to kill the server under a 3 GB address-space limit, as serve
// skipped segment's memory estimate), 1200×1200 images the memory budget
// admits a few at a time, malformed requests and normal clients. The
// normal clients are served, nothing gets a 500, and the server survives
// and stops cleanly.
func TestServeSurvivesHostileLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds segtune: skipped in -short mode")
	}
	runtimetest.Require(t)
	bin := segtuneBinary(t)
	model := redModel(t, t.TempDir())
	bodies := loadBodies(t)
	t.Run("address-space limit", func(t *testing.T) {
		prlimit, err := exec.LookPath("prlimit")
		if err != nil {
			testassets.SkipOrFail(t, "no prlimit tool (util-linux): %v", err)
		}
		hostileLoad(t, bodies, []string{prlimit, "--as=3000000000"}, bin, model)
	})
	t.Run("cgroup memory limit", func(t *testing.T) {
		procs := memoryCgroup(t, 1500<<20)
		hostileLoad(t, bodies, []string{"sh", "-c", `echo $$ > "$0" && exec "$@"`, procs}, bin, model)
	})
}

type loadBodySet struct{ normal, bomb, mid []byte }

func loadBodies(t *testing.T) loadBodySet {
	t.Helper()
	opaque := func(w, h int) []byte {
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for i := 3; i < len(img.Pix); i += 4 {
			img.Pix[i] = 0xff // opaque: an 8-bit RGB PNG, as photos are
		}
		img.SetNRGBA(w/2, h/2, color.NRGBA{200, 10, 10, 0xff})
		var b bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	s := loadBodySet{normal: smallPNG(t), bomb: opaque(2900, 2900), mid: opaque(1200, 1200)}
	t.Logf("bodies: normal %d B, 2900×2900 %d B, 1200×1200 %d B", len(s.normal), len(s.bomb), len(s.mid))
	return s
}

// memoryCgroup makes a memory cgroup of limit bytes below this process's
// own (cgroup v1 or v2) and returns its cgroup.procs file; it is removed
// when the test ends. Without the rights or the controller (no root, a
// v2 hierarchy whose parent does not delegate memory) it skips, through
// the project's skip helper.
func memoryCgroup(t *testing.T, limit int64) string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		testassets.SkipOrFail(t, "no cgroups to read: %v", err)
	}
	var dir, limitFile string
	for _, line := range strings.Split(string(self), "\n") {
		f := strings.SplitN(line, ":", 3)
		switch {
		case len(f) != 3:
		case f[1] != "" && strings.Contains(","+f[1]+",", ",memory,"):
			dir, limitFile = filepath.Join("/sys/fs/cgroup/memory", f[2]), "memory.limit_in_bytes"
		case f[0] == "0" && f[1] == "" && dir == "":
			if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
				dir, limitFile = filepath.Join("/sys/fs/cgroup", f[2]), "memory.max"
			}
		}
	}
	if dir == "" {
		testassets.SkipOrFail(t, "no memory cgroup controller in /proc/self/cgroup:\n%s", self)
	}
	dir = filepath.Join(dir, fmt.Sprintf("segtune-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testassets.SkipOrFail(t, "cannot make a memory cgroup (it needs root and a delegated memory controller): %v", err)
	}
	t.Cleanup(func() { os.Remove(dir) }) // after the child's cleanup has killed it
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		testassets.SkipOrFail(t, "cannot set %s in %s (no memory controller there): %v", limitFile, dir, err)
	}
	return filepath.Join(dir, "cgroup.procs")
}

// hostileLoad starts serve as prefix + bin, loads it for loadFor and
// checks that it served the normal clients, survived and stops cleanly.
func hostileLoad(t *testing.T, b loadBodySet, prefix []string, bin, model string) {
	const loadFor = 5 * time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	args := append(append([]string{}, prefix...), bin, "--quiet", "serve", "--model", model, "--addr", addr,
		"--threads", "2", "--max-pending", "32", "--read-timeout", "10s")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "SEGTUNE_MAX_MEMORY=", "GOMEMLIMIT=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed once serve has exited, with waitErr
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			t.Fatalf("serve exited before answering: %v\n%s", waitErr, stderr.String())
		default:
		}
		if r, err := freshClient.Get(base + "/healthz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer /healthz within a minute\n%s", stderr.String())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), loadFor)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var mu sync.Mutex
	counts := map[string]int{}
	// send posts body with query q and checks the status is one of ok;
	// it returns the status (0: no answer).
	send := func(kind, q string, body []byte, ok ...int) int {
		r, err := client.Post(base+"/v1/segment"+q, "application/octet-stream", bytes.NewReader(body))
		code := 0
		if err == nil {
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			code = r.StatusCode
		}
		mu.Lock()
		counts[fmt.Sprintf("%s %d", kind, code)]++
		mu.Unlock()
		if !slices.Contains(ok, code) {
			t.Errorf("%s: %d (%v), want one of %v", kind, code, err, ok)
		}
		return code
	}
	var wg sync.WaitGroup
	repeat := func(n int, f func()) {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					f()
				}
			}()
		}
	}
	// Slow bodies: 16 connections that send headers and 10 bytes, kept
	// open and reopened once the server cuts them off.
	repeat(16, func() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Errorf("slow body: %v", err)
			time.Sleep(100 * time.Millisecond)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/segment HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(b.normal))
		c.Write(b.normal[:10])
		c.SetReadDeadline(time.Now().Add(loadFor))
		line, _ := bufio.NewReader(c).ReadString('\n')
		code := 0 // cut off without an answer, or still open at the end
		fmt.Sscanf(line, "HTTP/1.1 %d", &code)
		mu.Lock()
		counts[fmt.Sprintf("slow body %d", code)]++
		mu.Unlock()
	})
	// 2900×2900 bombs: refused from the header (413), or 503 while busy.
	repeat(4, func() {
		send("2900×2900", "", b.bomb, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable)
	})
	// 1200×1200 images: admitted within the memory budget a few at once.
	repeat(2, func() { send("1200×1200", "?overlay=1", b.mid, http.StatusOK, http.StatusServiceUnavailable) })
	// Malformed requests.
	repeat(1, func() {
		send("truncated", "", b.normal[:len(b.normal)/2], http.StatusBadRequest)
		send("garbage", "", []byte("not an image at all"), http.StatusBadRequest)
		send("bad query", "?overlay=yes", b.normal, http.StatusBadRequest)
		send("declared 100000×100000", "", hugePNG(100_000, 100_000), http.StatusRequestEntityTooLarge)
	})
	// Normal clients: each request is served, retried on the 503 that
	// asks for it.
	normal := make(chan time.Duration, 1000)
	repeat(3, func() {
		t0 := time.Now()
		for send("normal", "", b.normal, http.StatusOK, http.StatusServiceUnavailable) != http.StatusOK {
			time.Sleep(100 * time.Millisecond)
			if time.Since(t0) > 20*time.Second {
				t.Errorf("a normal request was not served within 20s")
				return
			}
		}
		normal <- time.Since(t0)
	})
	wg.Wait()
	close(normal)
	var served int
	var worst time.Duration
	for d := range normal {
		served++
		worst = max(worst, d)
	}
	t.Logf("%d normal requests served, the slowest in %v; answers: %v", served, worst.Round(time.Millisecond), counts)
	if served == 0 {
		t.Error("no normal request was served")
	}
	if counts["1200×1200 200"] == 0 {
		t.Error("no 1200×1200 image was served: the memory budget admits none")
	}

	select {
	case <-exited:
		t.Fatalf("serve died under the load: %v\n%s", waitErr, stderr.String())
	default:
	}
	metrics := get(t, base+"/metrics")
	if strings.Contains(metrics, `segtune_requests_total{code="500"}`) {
		t.Errorf("/metrics counts 500s:\n%s", metrics)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("serve's exit on SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("serve did not stop within 40s of SIGTERM")
	}
	if s := stderr.String(); strings.Contains(s, "fatal error") || strings.Contains(s, "goroutine ") {
		t.Errorf("serve's stderr holds a runtime failure:\n%s", s)
	}
}
