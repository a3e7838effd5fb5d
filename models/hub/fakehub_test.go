package hub

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeHub serves repositories the way the Hugging Face Hub does: resolve
// URLs answering with X-Repo-Commit and ETags, .onnx files (LFS) by a 302
// to a CDN on another host with X-Linked-Etag/X-Linked-Size, other files
// directly with their git blob ETag, the file-list API, X-Error-Code on
// 401/404. Faults are switched on per test.
type fakeHub struct {
	t        *testing.T
	hub, cdn *httptest.Server
	commit   string
	// repos maps OWNER/REPO to its files.
	repos map[string]map[string][]byte
	gated map[string]bool
	token string

	mu        sync.Mutex
	cdnGets   int
	ranges    []string
	authAtCDN []string
	// truncate, when > 0, cuts that many full-body CDN answers short.
	truncate atomic.Int32
	corrupt  bool
	delay    time.Duration // before a CDN body
	stallMid time.Duration // in the middle of a full CDN body
	down     bool          // the Hub answers every request with a 503
}

const fakeCommit = "0123456789abcdef0123456789abcdef01234567"

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{t: t, commit: fakeCommit, repos: map[string]map[string][]byte{}, gated: map[string]bool{}}
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	h.hub = httptest.NewServer(http.HandlerFunc(h.serveHub))
	t.Cleanup(func() { h.hub.Close(); h.cdn.Close() })
	return h
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func gitSHA1Hex(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (h *fakeHub) blob(sha string) []byte {
	for _, files := range h.repos {
		for _, b := range files {
			if sha256Hex(b) == sha {
				return b
			}
		}
	}
	return nil
}

func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	if r.Method == http.MethodGet {
		h.cdnGets++
	}
	h.ranges = append(h.ranges, r.Header.Get("Range"))
	h.authAtCDN = append(h.authAtCDN, r.Header.Get("Authorization"))
	h.mu.Unlock()
	sha := strings.TrimPrefix(r.URL.Path, "/blobs/")
	b := h.blob(sha)
	if b == nil {
		http.NotFound(w, r)
		return
	}
	if h.corrupt {
		b = append([]byte{b[0] ^ 0xff}, b[1:]...)
	}
	if h.delay > 0 {
		time.Sleep(h.delay)
	}
	w.Header().Set("ETag", `"`+sha+`"`)
	if r.Header.Get("Range") == "" && h.stallMid > 0 {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		time.Sleep(h.stallMid)
		w.Write(b[len(b)/2:])
		return
	}
	if r.Header.Get("Range") == "" && h.truncate.Load() > 0 {
		h.truncate.Add(-1)
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b[:len(b)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops mid-body
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

func (h *fakeHub) fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", code+" (fake hub)")
	w.WriteHeader(status)
}

func (h *fakeHub) serveHub(w http.ResponseWriter, r *http.Request) {
	if h.down {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	if rest, ok := strings.CutPrefix(p, "api/models/"); ok {
		repo, rev, _ := strings.Cut(rest, "/revision/")
		files, ok := h.repos[repo]
		if !ok || (rev != "main" && rev != h.commit) {
			h.fail(w, http.StatusNotFound, "RepoNotFound")
			return
		}
		var sib []map[string]string
		for name := range files {
			sib = append(sib, map[string]string{"rfilename": name})
		}
		json.NewEncoder(w).Encode(map[string]any{"sha": h.commit, "siblings": sib})
		return
	}
	parts := strings.SplitN(p, "/", 5) // owner, repo, resolve, rev, file
	if len(parts) < 5 || parts[2] != "resolve" {
		http.NotFound(w, r)
		return
	}
	repo, rev, file := parts[0]+"/"+parts[1], parts[3], parts[4]
	if repo == "old/name" { // a renamed repository: a relative redirect
		http.Redirect(w, r, "/acme/seg/resolve/"+rev+"/"+file, http.StatusTemporaryRedirect)
		return
	}
	if h.gated[repo] && r.Header.Get("Authorization") != "Bearer "+h.token {
		h.fail(w, http.StatusUnauthorized, "GatedRepo")
		return
	}
	files, ok := h.repos[repo]
	if !ok {
		h.fail(w, http.StatusUnauthorized, "RepoNotFound")
		return
	}
	if rev != "main" && rev != h.commit {
		h.fail(w, http.StatusNotFound, "RevisionNotFound")
		return
	}
	b, ok := files[file]
	if !ok {
		h.fail(w, http.StatusNotFound, "EntryNotFound")
		return
	}
	w.Header().Set("X-Repo-Commit", h.commit)
	if strings.HasSuffix(file, ".onnx") { // LFS: to the CDN
		sha := sha256Hex(b)
		w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(b)))
		w.Header().Set("ETag", `"`+gitSHA1Hex([]byte("lfs pointer"))+`"`)
		http.Redirect(w, r, h.cdn.URL+"/blobs/"+sha, http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+gitSHA1Hex(b)+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// client is a client of the fake hub with a fresh cache and quick
// timeouts, collecting its notices.
func (h *fakeHub) client(cache string) (*Client, *[]string) {
	var notes []string
	var mu sync.Mutex
	return &Client{Endpoint: h.hub.URL, CacheDir: cache, MetaTimeout: 2 * time.Second, StallTimeout: 2 * time.Second, Retries: 2,
		Note: func(s string) { mu.Lock(); notes = append(notes, s); mu.Unlock() }}, &notes
}

func (h *fakeHub) gets() int { h.mu.Lock(); defer h.mu.Unlock(); return h.cdnGets }
