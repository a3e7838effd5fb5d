package hub

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/segtune/segtune/internal/filelock"
)

// IsURL reports whether v is a plain web URL (http:// or https://).
func IsURL(v string) bool {
	l := strings.ToLower(v)
	return strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")
}

// parseURL checks a plain URL: https (http only to this machine, for
// local mirrors), naming a file; its fragment may pin the file's
// checksum as #sha256=HEX.
func parseURL(v string) (u *url.URL, name, sha string, err error) {
	u, err = url.Parse(v)
	if err != nil {
		return nil, "", "", fmt.Errorf("%q: %w", v, err)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return nil, "", "", fmt.Errorf("%s: only https:// URLs are accepted (http:// only to this machine)", v)
	}
	if u.Fragment != "" {
		s, ok := strings.CutPrefix(u.Fragment, "sha256=")
		sha = strings.ToLower(s)
		if !ok || !hex64RE.MatchString(sha) {
			return nil, "", "", fmt.Errorf("%s: fragment %q: want #sha256=HEX (64 hex digits)", v, u.Fragment)
		}
		u.Fragment = ""
	}
	name = path.Base(u.Path)
	if name == "/" || name == "." || !filepath.IsLocal(name) {
		return nil, "", "", fmt.Errorf("%s: the URL names no file", v)
	}
	return u, name, sha, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// DownloadURL returns the cached file of a plain URL, fetching it first
// unless the cache holds a copy that still matches the server's ETag
// (or, without one, its size). The SHA-256 is recorded on the first
// download and checked at every use; a #sha256=HEX fragment pins it
// beforehand. Offline, or when the server cannot be reached, a cached
// copy is used; without one, an *OfflineError.
func (c *Client) DownloadURL(ctx context.Context, v string) (*Result, error) {
	u, name, sha, err := parseURL(v)
	if err != nil {
		return nil, err
	}
	src := u.String()
	dir := c.urlDir(src)
	dst, pinPath := filepath.Join(dir, name), filepath.Join(dir, "pin.json")
	cached := func() (*Result, error) {
		pin, err := readPin(pinPath)
		if err != nil || pin == nil {
			return nil, err
		}
		if sha != "" && pin.SHA256 != sha {
			return nil, nil
		}
		if err := verify(dst, pin); err != nil {
			c.note("%v; downloading it again", err)
			return nil, err
		}
		return &Result{Path: dst, Pin: *pin}, nil
	}
	offline := func(cause error) (*Result, error) {
		r, err := cached()
		if err != nil {
			return nil, err
		}
		if r == nil {
			return nil, &OfflineError{Target: src, Cause: cause}
		}
		if cause != nil {
			c.note("%s cannot be reached (%v); using the cached copy", src, cause)
		}
		r.Offline = true
		return r, nil
	}
	if c.Offline {
		return offline(nil)
	}
	m, err := c.headPlain(ctx, src)
	if isNetworkError(err) {
		return offline(err)
	}
	if err != nil {
		return nil, err
	}
	fresh := func(p Pin) bool { return (m.etag != "" && p.ETag == m.etag) || (m.etag == "" && p.Size == m.size) }
	if r, err := cached(); err == nil && r != nil && fresh(r.Pin) {
		return r, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := filelock.Acquire(ctx, filepath.Join(dir, ".lock"), func() { c.note("waiting for another segtune process downloading %s", src) })
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if r, err := cached(); err == nil && r != nil && fresh(r.Pin) {
		return r, nil
	}
	os.Remove(pinPath)
	want := expectFrom(m.etag, m.size)
	want.gitSHA1 = "" // only the Hub's ETags are checksums
	if !strings.HasPrefix(src, c.Endpoint+"/") {
		want.sha256 = ""
	}
	if sha != "" {
		want.sha256 = sha
	}
	sum, size, err := c.transfer(ctx, src, filepath.Join(dir, ".incomplete"), dst, name, want)
	if err != nil {
		return nil, err
	}
	pin := Pin{Source: v, URL: src, SHA256: sum, Size: size, ETag: m.etag, Downloaded: time.Now().UTC()}
	if err := writeJSON(pinPath, pin); err != nil {
		return nil, err
	}
	return &Result{Path: dst, Pin: pin, Downloaded: true}, nil
}

// headPlain asks a web server for a file's ETag and size, following
// redirects.
func (c *Client) headPlain(ctx context.Context, u string) (fileMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, c.MetaTimeout)
	defer cancel()
	req, err := c.newRequest(ctx, http.MethodHead, u)
	if err != nil {
		return fileMeta{}, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := (&http.Client{Transport: c.transport(), CheckRedirect: dropAuthElsewhere}).Do(req)
	if err != nil {
		return fileMeta{}, err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fileMeta{}, statusError(u, resp)
	}
	m := fileMeta{etag: normalizeETag(resp.Header.Get("X-Linked-Etag")), size: resp.ContentLength}
	if m.etag == "" {
		m.etag = normalizeETag(resp.Header.Get("ETag"))
	}
	return m, nil
}
