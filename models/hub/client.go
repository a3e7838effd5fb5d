package hub

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The environment variables huggingface_hub reads, read the same way.
const (
	EndpointEnv        = "HF_ENDPOINT"
	TokenEnv           = "HF_TOKEN"
	TokenPathEnv       = "HF_TOKEN_PATH"
	HomeEnv            = "HF_HOME"
	OfflineEnv         = "HF_HUB_OFFLINE"
	EtagTimeoutEnv     = "HF_HUB_ETAG_TIMEOUT"
	DownloadTimeoutEnv = "HF_HUB_DOWNLOAD_TIMEOUT"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// defaultTimeout is huggingface_hub's default for both the metadata
// request and a stalled download.
const defaultTimeout = 10 * time.Second

// Client downloads Hub files and URLs into a cache folder.
type Client struct {
	// Endpoint is the Hub's base URL (no trailing slash).
	Endpoint string
	// Token, when set, is sent as a bearer token to the Hub (never to the
	// CDN a download is redirected to: Go drops it across hosts).
	Token string
	// Offline makes every request fail over to the cache at once.
	Offline bool
	// CacheDir holds the downloads: models--OWNER--REPO/ for the Hub,
	// urls/HASH/ for plain URLs.
	CacheDir string
	// MetaTimeout bounds a metadata request (HEAD, the file list);
	// StallTimeout is how long a download may receive nothing.
	MetaTimeout, StallTimeout time.Duration
	// Retries is how many more times a failed transfer is resumed.
	Retries int
	// NewBar, when set, returns a progress bar for a download of size
	// bytes (-1: unknown) of which have are already there; the bytes
	// received are written to it and it is closed at the end.
	NewBar func(name string, size, have int64) io.WriteCloser
	// Note, when set, receives one-line notices: waiting for another
	// process's download, falling back to the cache, a damaged cache
	// file replaced.
	Note func(string)
	// HTTP is the transport (nil: http.DefaultTransport).
	HTTP http.RoundTripper
}

// FromEnv returns a client for cacheDir configured as huggingface_hub
// configures itself: HF_ENDPOINT, HF_TOKEN (else the token file at
// HF_TOKEN_PATH or HF_HOME/token), HF_HUB_OFFLINE, HF_HUB_ETAG_TIMEOUT
// and HF_HUB_DOWNLOAD_TIMEOUT (seconds). A malformed value is an error
// naming the variable.
func FromEnv(cacheDir string) (*Client, error) {
	c := &Client{Endpoint: DefaultEndpoint, CacheDir: cacheDir, MetaTimeout: defaultTimeout, StallTimeout: defaultTimeout, Retries: 3}
	if e := os.Getenv(EndpointEnv); e != "" {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("%s=%q: want the Hub's base URL, e.g. %s", EndpointEnv, e, DefaultEndpoint)
		}
		c.Endpoint = strings.TrimRight(e, "/")
	}
	c.Token = strings.TrimSpace(os.Getenv(TokenEnv))
	if c.Token == "" {
		if data, err := os.ReadFile(tokenPath()); err == nil {
			c.Token = strings.TrimSpace(string(data))
		}
	}
	c.Offline = truthy(os.Getenv(OfflineEnv))
	for _, t := range []struct {
		env string
		d   *time.Duration
	}{{EtagTimeoutEnv, &c.MetaTimeout}, {DownloadTimeoutEnv, &c.StallTimeout}} {
		if v := os.Getenv(t.env); v != "" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil || s <= 0 || s > 86400 {
				return nil, fmt.Errorf("%s=%q: want a number of seconds", t.env, v)
			}
			*t.d = time.Duration(s * float64(time.Second))
		}
	}
	return c, nil
}

// tokenPath is where `hf auth login` keeps the token.
func tokenPath() string {
	if p := os.Getenv(TokenPathEnv); p != "" {
		return p
	}
	home := os.Getenv(HomeEnv)
	if home == "" {
		if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
			home = filepath.Join(x, "huggingface")
		} else if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".cache", "huggingface")
		}
	}
	return filepath.Join(home, "token")
}

// truthy is huggingface_hub's reading of a boolean variable.
func truthy(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

func (c *Client) note(format string, args ...any) {
	if c.Note != nil {
		c.Note(fmt.Sprintf(format, args...))
	}
}

func (c *Client) transport() http.RoundTripper {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultTransport
}

// resolveURL is where the Hub serves a file of a repository at a revision.
func (c *Client) resolveURL(repo, rev, file string) string {
	return c.Endpoint + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + escapePath(file)
}

// escapePath escapes each segment of a slash-separated path.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// newRequest builds a request carrying the token when it goes to the
// Hub's endpoint.
func (c *Client) newRequest(ctx context.Context, method, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "segtune")
	if c.Token != "" && strings.HasPrefix(u, c.Endpoint+"/") {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// statusError turns a refused response into an *HTTPError.
func statusError(u string, resp *http.Response) error {
	return &HTTPError{URL: u, Status: resp.StatusCode,
		Code: resp.Header.Get("X-Error-Code"), Message: resp.Header.Get("X-Error-Message")}
}
