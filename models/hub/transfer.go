package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segtune/segtune/internal/regfile"
)

// expect is what the server announced of a file before its download.
type expect struct {
	size int64 // -1: unknown
	// sha256 or gitSHA1 (hex), when the ETag is one of them.
	sha256, gitSHA1 string
	etag            string
}

// expectFrom reads the checksum an ETag carries: the Hub's LFS ETag is
// the file's SHA-256, its git ETag the blob's SHA-1.
func expectFrom(etag string, size int64) expect {
	e := expect{size: size, etag: etag}
	switch {
	case hex64RE.MatchString(etag):
		e.sha256 = etag
	case hex40RE.MatchString(etag):
		e.gitSHA1 = etag
	}
	return e
}

var (
	hex64RE        = regexp.MustCompile(`^[0-9a-f]{64}$`)
	hex40RE        = regexp.MustCompile(`^[0-9a-f]{40}$`)
	contentRangeRE = regexp.MustCompile(`^bytes (\d+)-(\d+)/(\d+|\*)$`)
)

// errStalled is a download that received nothing for StallTimeout.
var errStalled = errors.New("no data received")

// transfer downloads u into dst through a partial file in partDir that
// a later call resumes (HTTP Range, If-Range on the ETag); a transfer
// that breaks off is resumed up to c.Retries times. The file lands at
// dst (renamed into place, so never truncated) only once it has the
// announced size and checksum; a wrong checksum discards it. It returns
// the file's SHA-256 and size.
func (c *Client) transfer(ctx context.Context, u, partDir, dst, name string, want expect) (string, int64, error) {
	if err := os.MkdirAll(partDir, 0o755); err != nil {
		return "", 0, err
	}
	part := filepath.Join(partDir, shortHash(u+"\x00"+want.etag)+".part")
	var lastErr error
	done := false
	for attempt := 0; attempt <= c.Retries && !done; attempt++ {
		if attempt > 0 {
			c.note("%s: %v; resuming (try %d of %d)", name, lastErr, attempt+1, c.Retries+1)
			select {
			case <-ctx.Done():
				return "", 0, ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		done, lastErr = c.fetchOnce(ctx, u, part, name, want)
		if ctx.Err() != nil {
			return "", 0, ctx.Err()
		}
		var he *HTTPError
		if errors.As(lastErr, &he) && he.Status < 500 {
			return "", 0, lastErr
		}
	}
	if !done {
		return "", 0, &TransferError{URL: u, Err: lastErr}
	}
	fi, err := os.Stat(part)
	if err != nil {
		return "", 0, err
	}
	sum, err := regfile.SHA256(part)
	if err != nil {
		return "", 0, err
	}
	if want.sha256 != "" && sum != want.sha256 {
		os.Remove(part)
		return "", 0, &ChecksumError{URL: u, Algorithm: "sha256", Want: want.sha256, Got: sum}
	}
	if want.gitSHA1 != "" {
		if got, err := gitBlobSHA1(part, fi.Size()); err != nil {
			return "", 0, err
		} else if got != want.gitSHA1 {
			os.Remove(part)
			return "", 0, &ChecksumError{URL: u, Algorithm: "git-sha1", Want: want.gitSHA1, Got: got}
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return "", 0, err
	}
	if err := os.Rename(part, dst); err != nil {
		return "", 0, err
	}
	return sum, fi.Size(), nil
}

// fetchOnce makes one request for what the partial file lacks and
// appends the answer to it. It reports whether the file is complete.
func (c *Client) fetchOnce(ctx context.Context, u, part, name string, want expect) (bool, error) {
	var have int64
	if fi, err := os.Stat(part); err == nil {
		have = fi.Size()
	}
	if want.size >= 0 && have > want.size {
		have = 0
	}
	if want.size >= 0 && have == want.size && have > 0 {
		return true, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	timer := time.AfterFunc(c.StallTimeout, func() { stalled.Store(true); cancel() })
	defer timer.Stop()
	req, err := c.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
		if want.etag != "" {
			req.Header.Set("If-Range", `"`+want.etag+`"`)
		}
	}
	resp, err := (&http.Client{Transport: c.transport(), CheckRedirect: dropAuthElsewhere}).Do(req)
	if err != nil {
		if stalled.Load() {
			return false, errStalled
		}
		return false, err
	}
	defer resp.Body.Close()
	flags := os.O_WRONLY | os.O_CREATE
	switch resp.StatusCode {
	case http.StatusPartialContent:
		m := contentRangeRE.FindStringSubmatch(resp.Header.Get("Content-Range"))
		if m == nil {
			return false, fmt.Errorf("answer to a range request has Content-Range %q", resp.Header.Get("Content-Range"))
		}
		if start, _ := strconv.ParseInt(m[1], 10, 64); start != have {
			os.Remove(part) // the server resumes elsewhere: start over
			return false, fmt.Errorf("server resumed at byte %d, not %d", start, have)
		}
		flags |= os.O_APPEND
	case http.StatusOK:
		have = 0
		flags |= os.O_TRUNC
	case http.StatusRequestedRangeNotSatisfiable:
		os.Remove(part)
		return false, errors.New("server refused to resume the partial download; starting over")
	default:
		return false, statusError(u, resp)
	}
	total := want.size
	if total < 0 && resp.ContentLength >= 0 {
		total = have + resp.ContentLength
	}
	f, err := os.OpenFile(part, flags, 0o644)
	if err != nil {
		return false, err
	}
	var w io.Writer = f
	if c.NewBar != nil {
		bar := c.NewBar(name, total, have)
		defer bar.Close()
		w = io.MultiWriter(f, bar)
	}
	n, copyErr := io.Copy(w, &stallReader{r: resp.Body, timer: timer, d: c.StallTimeout})
	// A part file that did not reach the disk is no progress to resume.
	syncErr, closeErr := f.Sync(), f.Close()
	if copyErr == nil {
		copyErr = errors.Join(syncErr, closeErr)
	}
	if stalled.Load() {
		return false, errStalled
	}
	if copyErr != nil {
		return false, copyErr
	}
	if got := have + n; total >= 0 && got != total {
		return false, fmt.Errorf("connection closed after %d of %d bytes", got, total)
	}
	return true, nil
}

// stallReader restarts the stall timer at every read that brings data.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	d     time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.d)
	}
	return n, err
}

// dropAuthElsewhere keeps the token from a redirect's target on another
// host (the CDN), port included, as huggingface_hub does.
func dropAuthElsewhere(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Host != via[0].URL.Host {
		req.Header.Del("Authorization")
	}
	return nil
}
