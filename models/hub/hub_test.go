package hub

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	modelBytes = bytes.Repeat([]byte("onnx-model-bytes-"), 4096)
	preproc    = []byte(`{"image_mean":[0.5,0.5,0.5],"image_std":[0.5,0.5,0.5],"size":{"height":64,"width":64}}`)
)

func seededHub(t *testing.T) *fakeHub {
	h := newFakeHub(t)
	h.repos["acme/seg"] = map[string][]byte{"onnx/model.onnx": modelBytes, "preprocessor_config.json": preproc, "README.md": []byte("hi")}
	return h
}

func mustRef(t *testing.T, v string) Ref {
	t.Helper()
	r, err := ParseRef(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A branch is resolved to its commit, recorded; the file is fetched
// through the CDN redirect, checked against X-Linked-Etag and pinned with
// its configurations; the next use, and a use by commit with the Hub
// gone, download nothing.
func TestDownloadPinsAndReusesCache(t *testing.T) {
	h := seededHub(t)
	cache := t.TempDir()
	c, _ := h.client(cache)
	r, err := c.Download(context.Background(), mustRef(t, "hf:acme/seg/onnx/model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(r.Path)
	if !bytes.Equal(got, modelBytes) || !r.Downloaded {
		t.Fatalf("downloaded %d bytes (Downloaded %v), want the model's %d", len(got), r.Downloaded, len(modelBytes))
	}
	if r.Pin.Commit != fakeCommit || r.Pin.SHA256 != sha256Hex(modelBytes) || r.Pin.Size != int64(len(modelBytes)) {
		t.Fatalf("pin %+v", r.Pin)
	}
	if ref, _ := os.ReadFile(c.refPath("acme/seg", "main")); strings.TrimSpace(string(ref)) != fakeCommit {
		t.Fatalf("refs/main holds %q, want the commit", ref)
	}
	if p := r.Configs["preprocessor_config.json"]; p == "" || r.Configs["config.json"] != "" {
		t.Fatalf("configs %v: want preprocessor_config.json only (the repository has no config.json)", r.Configs)
	}
	if pin, root, err := LookupPin(cache, r.Path); err != nil || pin == nil || pin.Commit != fakeCommit || root != r.Root {
		t.Fatalf("LookupPin = %+v, %q, %v; want the pin and root %q", pin, root, err, r.Root)
	}
	r2, err := c.Download(context.Background(), mustRef(t, "hf:acme/seg/onnx/model.onnx@main"))
	if err != nil || r2.Downloaded || r2.Path != r.Path || h.gets() != 1 {
		t.Fatalf("second use: %+v, %v, CDN GETs %d; want the cached copy and 1 GET", r2, err, h.gets())
	}
	h.hub.Close()
	h.cdn.Close()
	r3, err := c.Download(context.Background(), mustRef(t, "hf:acme/seg/onnx/model.onnx@"+fakeCommit))
	if err != nil || r3.Path != r.Path || r3.Offline {
		t.Fatalf("by commit with the Hub gone: %+v, %v; want the pinned copy without asking", r3, err)
	}
	pins, err := Cached(cache)
	if err != nil || len(pins) != 1 || pins[0].File != "onnx/model.onnx" {
		t.Fatalf("Cached = %+v, %v; want the one model", pins, err)
	}
}

// A body cut short is resumed with a Range request; with no retries
// left, the partial download stays out of the cache and the next call
// resumes it.
func TestDownloadResumesTruncatedBody(t *testing.T) {
	h := seededHub(t)
	c, _ := h.client(t.TempDir())
	ref := mustRef(t, "hf:acme/seg/onnx/model.onnx")
	h.truncate.Store(1)
	c.Retries = 0
	_, err := c.Download(context.Background(), ref)
	var te *TransferError
	if !errors.As(err, &te) {
		t.Fatalf("truncated body, no retries: %v; want a *TransferError", err)
	}
	if _, err := os.Stat(c.snapshotPath("acme/seg", fakeCommit, "onnx/model.onnx")); err == nil {
		t.Fatal("a truncated download is in the cache")
	}
	r, err := c.Download(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(r.Path); !bytes.Equal(got, modelBytes) {
		t.Fatal("resumed file differs from the model")
	}
	want := "bytes=" + itoa(len(modelBytes)/2) + "-"
	if h.ranges[len(h.ranges)-1] != want {
		t.Fatalf("CDN saw ranges %q; want the last to be %q", h.ranges, want)
	}
	// With retries, one call gets through a cut.
	c2, notes := h.client(t.TempDir())
	h.truncate.Store(1)
	if _, err := c2.Download(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if len(*notes) == 0 || !strings.Contains((*notes)[0], "resuming") {
		t.Fatalf("notes %q; want one saying the download resumes", *notes)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A body whose SHA-256 is not the announced one is discarded.
func TestDownloadWrongChecksum(t *testing.T) {
	h := seededHub(t)
	c, _ := h.client(t.TempDir())
	h.corrupt = true
	_, err := c.Download(context.Background(), mustRef(t, "hf:acme/seg/onnx/model.onnx"))
	var ce *ChecksumError
	if !errors.As(err, &ce) || ce.Want != sha256Hex(modelBytes) {
		t.Fatalf("corrupt body: %v; want a *ChecksumError wanting the model's SHA-256", err)
	}
	if _, err := os.Stat(c.snapshotPath("acme/seg", fakeCommit, "onnx/model.onnx")); err == nil {
		t.Fatal("a corrupt download is in the cache")
	}
}

// A server that stops sending, before its answer or in the middle of
// the body, fails the download after the stall timeout, not never.
func TestDownloadStallTimeout(t *testing.T) {
	for _, mid := range []bool{false, true} {
		h := seededHub(t)
		c, _ := h.client(t.TempDir())
		c.StallTimeout, c.Retries = 100*time.Millisecond, 0
		if mid {
			h.stallMid = time.Second
		} else {
			h.delay = time.Second
		}
		_, err := c.Download(context.Background(), mustRef(t, "hf:acme/seg/onnx/model.onnx"))
		if !errors.Is(err, errStalled) {
			t.Fatalf("stalled (mid-body %v): %v; want errStalled", mid, err)
		}
	}
}

// 401 and 404 name the URL and what is wrong; a token opens a gated
// repository and is not sent to the CDN.
func TestDownloadHTTPErrors(t *testing.T) {
	h := seededHub(t)
	h.repos["acme/gated"] = map[string][]byte{"m.onnx": modelBytes}
	h.gated["acme/gated"], h.token = true, "secret"
	c, _ := h.client(t.TempDir())
	for _, tc := range []struct{ ref, want string }{
		{"hf:acme/seg/nope.onnx", "EntryNotFound"},
		{"hf:acme/seg/onnx/model.onnx@v9", "no such branch, tag or commit"},
		{"hf:acme/gated/m.onnx", "gated"},
		{"hf:nobody/none/m.onnx", "401"},
	} {
		_, err := c.Download(context.Background(), mustRef(t, tc.ref))
		var he *HTTPError
		if !errors.As(err, &he) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), h.hub.URL) {
			t.Errorf("%s: %v; want an *HTTPError naming the URL and %q", tc.ref, err, tc.want)
		}
	}
	c.Token = "secret"
	if _, err := c.Download(context.Background(), mustRef(t, "hf:acme/gated/m.onnx")); err != nil {
		t.Fatalf("with the token: %v", err)
	}
	for _, a := range h.authAtCDN {
		if a != "" {
			t.Fatalf("the CDN received Authorization %q", a)
		}
	}
	if r, err := c.Download(context.Background(), mustRef(t, "hf:old/name/onnx/model.onnx")); err != nil || r.Pin.Commit != fakeCommit {
		t.Fatalf("renamed repository (relative redirect): %v", err)
	}
}

// Without a file, the repository's only .onnx is used; with several,
// the error lists them.
func TestDownloadPicksTheOnlyONNX(t *testing.T) {
	h := seededHub(t)
	h.repos["acme/two"] = map[string][]byte{"a.onnx": modelBytes, "b/c.onnx": modelBytes}
	c, _ := h.client(t.TempDir())
	r, err := c.Download(context.Background(), mustRef(t, "hf:acme/seg"))
	if err != nil || r.Pin.File != "onnx/model.onnx" {
		t.Fatalf("single .onnx: %+v, %v", r, err)
	}
	_, err = c.Download(context.Background(), mustRef(t, "hf:acme/two"))
	var ce *ChoiceError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "hf:acme/two/a.onnx, hf:acme/two/b/c.onnx") {
		t.Fatalf("two .onnx: %v; want a *ChoiceError listing both", err)
	}
}

// Offline: HF_HUB_OFFLINE with an empty cache is refused; with the
// model pinned it serves the cache, as it does when the Hub fails.
func TestDownloadOffline(t *testing.T) {
	h := seededHub(t)
	c, notes := h.client(t.TempDir())
	ref := mustRef(t, "hf:acme/seg")
	c.Offline = true
	var oe *OfflineError
	if _, err := c.Download(context.Background(), ref); !errors.As(err, &oe) || oe.Cause != nil {
		t.Fatalf("offline, empty cache: %v; want an *OfflineError", err)
	}
	h.down = true
	c.Offline = false
	if _, err := c.Download(context.Background(), ref); !errors.As(err, &oe) || oe.Cause == nil {
		t.Fatalf("Hub down, empty cache: %v; want an *OfflineError with the cause", err)
	}
	h.down = false
	first, err := c.Download(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	c.Offline = true
	r, err := c.Download(context.Background(), ref)
	if err != nil || r.Path != first.Path || !r.Offline || r.Configs["preprocessor_config.json"] == "" {
		t.Fatalf("offline with the cache: %+v, %v", r, err)
	}
	c.Offline = false
	h.hub.Close()
	*notes = nil
	r, err = c.Download(context.Background(), mustRef(t, "hf:acme/seg/onnx/model.onnx"))
	if err != nil || r.Path != first.Path || !r.Offline || len(*notes) != 1 || !strings.Contains((*notes)[0], "cannot be reached") {
		t.Fatalf("Hub unreachable with the cache: %+v, %v, notes %q", r, err, *notes)
	}
}

// A cached file changed after its download is detected: online it is
// downloaded again, offline it is refused.
func TestDownloadDetectsTamperedCache(t *testing.T) {
	h := seededHub(t)
	c, notes := h.client(t.TempDir())
	ref := mustRef(t, "hf:acme/seg/onnx/model.onnx")
	r, err := c.Download(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.Path, append([]byte("x"), modelBytes[1:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	c.Offline = true
	var te *TamperedError
	if _, err := c.Download(context.Background(), ref); !errors.As(err, &te) {
		t.Fatalf("offline, tampered: %v; want a *TamperedError", err)
	}
	c.Offline = false
	if _, err := c.Download(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(r.Path); !bytes.Equal(got, modelBytes) || h.gets() != 2 {
		t.Fatalf("after tampering: file restored %v, CDN GETs %d; want restored with a 2nd GET", bytes.Equal(got, modelBytes), h.gets())
	}
	if len(*notes) == 0 || !strings.Contains(strings.Join(*notes, "\n"), "downloading it again") {
		t.Fatalf("notes %q; want one about the damaged copy", *notes)
	}
}

// Two downloads of one file at once: one transfers, the other waits on
// the lock and then uses its copy.
func TestConcurrentDownloadsTransferOnce(t *testing.T) {
	h := seededHub(t)
	h.delay = 300 * time.Millisecond
	cache := t.TempDir()
	ref := mustRef(t, "hf:acme/seg/onnx/model.onnx")
	var wg sync.WaitGroup
	paths := make([]string, 2)
	errs := make([]error, 2)
	var notes [2]*[]string
	for i := range 2 {
		c, n := h.client(cache)
		notes[i] = n
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.Download(context.Background(), ref)
			errs[i] = err
			if err == nil {
				paths[i] = r.Path
			}
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil || paths[0] != paths[1] {
		t.Fatalf("results %q, %v", paths, errs)
	}
	if h.gets() != 1 {
		t.Fatalf("CDN GETs %d; want 1", h.gets())
	}
	all := append(*notes[0], *notes[1]...)
	for _, n := range all {
		if !strings.Contains(n, "waiting for another segtune process") {
			t.Fatalf("notes %q; want only notes about waiting", all)
		}
	}
	if len(all) == 0 {
		t.Fatal("no note about waiting for the other download")
	}
}

// A plain URL is downloaded once, reused while its ETag holds, and
// checked against a #sha256= pin; non-https URLs elsewhere are refused.
func TestDownloadURL(t *testing.T) {
	h := seededHub(t)
	c, _ := h.client(t.TempDir())
	u := h.cdn.URL + "/blobs/" + sha256Hex(modelBytes)
	r, err := c.DownloadURL(context.Background(), u+"#sha256="+sha256Hex(modelBytes))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(r.Path); !bytes.Equal(got, modelBytes) || filepath.Base(r.Path) != sha256Hex(modelBytes) {
		t.Fatalf("file %s", r.Path)
	}
	if r2, err := c.DownloadURL(context.Background(), u); err != nil || r2.Downloaded || h.gets() != 1 {
		t.Fatalf("second use: %v, downloaded %v, GETs %d", err, r2 != nil && r2.Downloaded, h.gets())
	}
	var ce *ChecksumError
	if _, err := c.DownloadURL(context.Background(), u+"#sha256="+strings.Repeat("0", 64)); !errors.As(err, &ce) {
		t.Fatalf("wrong pinned checksum: %v; want a *ChecksumError", err)
	}
	for _, bad := range []string{"http://example.com/m.onnx", "https://example.com/", u + "#md5=00"} {
		if _, err := c.DownloadURL(context.Background(), bad); err == nil || !strings.Contains(err.Error(), bad[:12]) {
			t.Errorf("%s: %v; want an error naming it", bad, err)
		}
	}
}

func TestParseRef(t *testing.T) {
	for v, want := range map[string]Ref{
		"hf:a/b":                      {Repo: "a/b", Revision: "main"},
		"hf:a/b/onnx/m.onnx@v1.0":     {Repo: "a/b", File: "onnx/m.onnx", Revision: "v1.0"},
		"hf:a/b@refs/pr/1":            {Repo: "a/b", Revision: "refs/pr/1"},
		"hf:Xenova/seg-b0_x.1/m.ONNX": {Repo: "Xenova/seg-b0_x.1", File: "m.ONNX", Revision: "main"},
	} {
		if got, err := ParseRef(v); err != nil || got != want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v", v, got, err, want)
		}
	}
	for _, v := range []string{"hf:a", "hf:a/b/../c.onnx", "hf:a/b/model.bin", "hf:a/b@", "hf:a/b@x..y", "hf:../b", "hf:a/b//m.onnx"} {
		if _, err := ParseRef(v); err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("ParseRef(%q): %v; want an error naming it", v, err)
		}
	}
}

func TestFromEnv(t *testing.T) {
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "token"), []byte("from-file\n"), 0o600)
	t.Setenv(HomeEnv, home)
	t.Setenv(TokenPathEnv, "")
	t.Setenv(TokenEnv, "")
	t.Setenv(EndpointEnv, "https://mirror.example/")
	t.Setenv(OfflineEnv, "yes")
	t.Setenv(DownloadTimeoutEnv, "2.5")
	c, err := FromEnv("/cache")
	if err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != "https://mirror.example" || c.Token != "from-file" || !c.Offline || c.StallTimeout != 2500*time.Millisecond {
		t.Fatalf("client %+v", c)
	}
	t.Setenv(TokenEnv, "from-env")
	if c, _ := FromEnv("/cache"); c.Token != "from-env" {
		t.Fatalf("HF_TOKEN %q does not win over the token file", c.Token)
	}
	for env, v := range map[string]string{EndpointEnv: "huggingface.co", DownloadTimeoutEnv: "soon"} {
		t.Setenv(env, v)
		if _, err := FromEnv("/cache"); err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: %v; want an error naming the variable", env, v, err)
		}
		t.Setenv(EndpointEnv, "https://huggingface.co")
		t.Setenv(DownloadTimeoutEnv, "")
	}
}
