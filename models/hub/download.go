package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/filelock"
)

// ConfigFiles are the repository files read beside a model for its
// preprocessing and classes; they are fetched with it, when present.
var ConfigFiles = []string{"preprocessor_config.json", "config.json"}

// Result is a model file ready to use.
type Result struct {
	// Path is the model file in the cache.
	Path string
	Pin  Pin
	// Root is the cached snapshot of the repository (where ConfigFiles
	// are, when Configs lists them); "" for a plain URL.
	Root string
	// Configs maps each ConfigFiles entry the cache holds to its path.
	Configs map[string]string
	// Downloaded reports that the model was fetched now; Offline that
	// the network was not used (HF_HUB_OFFLINE) or failed.
	Downloaded, Offline bool
}

// Download returns the cached model file that ref names, fetching it
// (and its ConfigFiles) first unless the cache holds it pinned at the
// revision's current commit. A commit hash is immutable: once cached it
// is used without asking the Hub. A branch or tag is resolved to its
// commit, which is recorded. Offline, or when the Hub cannot be reached,
// the commit last recorded for the revision is used; without one, an
// *OfflineError.
func (c *Client) Download(ctx context.Context, ref Ref) (*Result, error) {
	if c.Offline {
		return c.fromCache(ref, nil)
	}
	if IsCommit(ref.Revision) && ref.File != "" {
		if r, err := c.cached(ref, ref.Revision, ref.File); err == nil && r != nil {
			return r, nil
		}
	}
	if ref.File == "" {
		file, err := c.pickFile(ctx, ref)
		if isNetworkError(err) {
			return c.fromCache(ref, err)
		}
		if err != nil {
			return nil, err
		}
		ref.File = file
	}
	m, err := c.head(ctx, c.resolveURL(ref.Repo, ref.Revision, ref.File))
	if isNetworkError(err) {
		return c.fromCache(ref, err)
	}
	if err != nil {
		return nil, err
	}
	if m.commit != ref.Revision {
		if err := writeRef(c.refPath(ref.Repo, ref.Revision), m.commit); err != nil {
			return nil, err
		}
	}
	r, err := c.cached(ref, m.commit, ref.File)
	if err != nil || r == nil {
		r, err = c.downloadLocked(ctx, ref, m)
	}
	if err != nil {
		return nil, err
	}
	r.Configs = c.fetchConfigs(ctx, ref, m.commit)
	return r, nil
}

func writeRef(path, commit string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(commit+"\n"), 0o644)
}

// cached returns the model at commit if the cache holds it pinned and
// intact, nil if it does not hold it, and a *TamperedError (after a
// notice) if it holds a damaged copy, which the caller replaces.
func (c *Client) cached(ref Ref, commit, file string) (*Result, error) {
	pin, err := readPin(c.pinPath(ref.Repo, commit, file))
	if err != nil || pin == nil || pin.Absent {
		return nil, err
	}
	p := c.snapshotPath(ref.Repo, commit, file)
	if err := verify(p, pin); err != nil {
		var te *TamperedError
		if errors.As(err, &te) {
			c.note("%v; downloading it again", err)
		}
		return nil, err
	}
	root := filepath.Join(c.repoDir(ref.Repo), "snapshots", commit)
	return &Result{Path: p, Pin: *pin, Root: root, Configs: c.cachedConfigs(ref.Repo, commit)}, nil
}

// downloadLocked downloads the model under the repository's lock for
// the file: a second process asking for it meanwhile waits, then finds
// it in the cache.
func (c *Client) downloadLocked(ctx context.Context, ref Ref, m fileMeta) (*Result, error) {
	dir := c.repoDir(ref.Repo)
	lock, err := c.lock(ctx, ref, m.commit+"/"+ref.File)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	if r, err := c.cached(ref, m.commit, ref.File); err == nil && r != nil {
		return r, nil
	}
	dst := c.snapshotPath(ref.Repo, m.commit, ref.File)
	os.Remove(c.pinPath(ref.Repo, m.commit, ref.File)) // a damaged copy's pin goes first
	u := c.resolveURL(ref.Repo, m.commit, ref.File)
	sum, size, err := c.transfer(ctx, u, filepath.Join(dir, ".incomplete"), dst, path.Base(ref.File), expectFrom(m.etag, m.size))
	if err != nil {
		return nil, err
	}
	pin := Pin{Source: ref.String(), Repo: ref.Repo, Revision: ref.Revision, Commit: m.commit, File: ref.File,
		URL: u, SHA256: sum, Size: size, ETag: m.etag, Downloaded: time.Now().UTC()}
	if err := writeJSON(c.pinPath(ref.Repo, m.commit, ref.File), pin); err != nil {
		return nil, err
	}
	return &Result{Path: dst, Pin: pin, Root: filepath.Join(dir, "snapshots", m.commit), Downloaded: true}, nil
}

// lock takes the repository's lock named by key, saying so when another
// process holds it.
func (c *Client) lock(ctx context.Context, ref Ref, key string) (*filelock.Lock, error) {
	dir := filepath.Join(c.repoDir(ref.Repo), ".locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return filelock.Acquire(ctx, filepath.Join(dir, shortHash(key)+".lock"), func() {
		c.note("waiting for another segtune process downloading %s", ref)
	})
}

// fromCache serves ref from the cache without the network: the commit
// last recorded for its revision, its file (or the only .onnx file
// pinned there). cause is the network failure, nil under HF_HUB_OFFLINE.
func (c *Client) fromCache(ref Ref, cause error) (*Result, error) {
	commit := c.readRef(ref.Repo, ref.Revision)
	if commit == "" {
		return nil, &OfflineError{Target: ref.String(), Cause: cause}
	}
	file := ref.File
	if file == "" {
		var onnx []string
		pins := filepath.Join(c.repoDir(ref.Repo), "pins", commit)
		filepath.WalkDir(pins, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".onnx.json") {
				rel, _ := filepath.Rel(pins, strings.TrimSuffix(p, ".json"))
				onnx = append(onnx, filepath.ToSlash(rel))
			}
			return nil
		})
		if len(onnx) != 1 {
			return nil, &OfflineError{Target: ref.String(), Cause: cause}
		}
		file = onnx[0]
	}
	ref.File = file
	r, err := c.cached(ref, commit, file)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, &OfflineError{Target: ref.String(), Cause: cause}
	}
	if cause != nil {
		c.note("%s: the Hub cannot be reached (%v); using the cached copy pinned at commit %s", ref, cause, commit)
	}
	r.Offline = true
	return r, nil
}

// cachedConfigs lists the ConfigFiles held for a commit.
func (c *Client) cachedConfigs(repo, commit string) map[string]string {
	out := map[string]string{}
	for _, name := range ConfigFiles {
		pin, err := readPin(c.pinPath(repo, commit, name))
		if err != nil || pin == nil || pin.Absent {
			continue
		}
		p := c.snapshotPath(repo, commit, name)
		if err := verify(p, pin); err != nil {
			c.note("%v; not using it", err)
			continue
		}
		out[name] = p
	}
	return out
}

// maxConfigBytes bounds a configuration file.
const maxConfigBytes = 1 << 20

// fetchConfigs fetches the ConfigFiles of a commit that the cache does
// not hold yet; one the repository lacks is pinned as absent. They are
// optional: a failure is a notice, not an error.
func (c *Client) fetchConfigs(ctx context.Context, ref Ref, commit string) map[string]string {
	lock, err := c.lock(ctx, ref, commit+"/configs")
	if err != nil {
		c.note("%s: configuration files not fetched: %v", ref, err)
		return c.cachedConfigs(ref.Repo, commit)
	}
	defer lock.Unlock()
	for _, name := range ConfigFiles {
		if pin, err := readPin(c.pinPath(ref.Repo, commit, name)); err == nil && pin != nil {
			if pin.Absent || verify(c.snapshotPath(ref.Repo, commit, name), pin) == nil {
				continue
			}
		}
		u := c.resolveURL(ref.Repo, commit, name)
		pin := Pin{Source: ref.String(), Repo: ref.Repo, Revision: ref.Revision, Commit: commit, File: name, URL: u, Downloaded: time.Now().UTC()}
		m, err := c.head(ctx, u)
		var he *HTTPError
		switch {
		case errors.As(err, &he) && he.Status == http.StatusNotFound:
			pin.Absent = true
		case err != nil:
			c.note("%s: %s not fetched: %v", ref, name, err)
			continue
		case m.size > maxConfigBytes:
			c.note("%s: %s is %d bytes, more than a configuration file holds; not fetched", ref, name, m.size)
			continue
		default:
			dir := c.repoDir(ref.Repo)
			sum, size, err := c.transfer(ctx, u, filepath.Join(dir, ".incomplete"), c.snapshotPath(ref.Repo, commit, name), name, expectFrom(m.etag, m.size))
			if err != nil {
				c.note("%s: %s not fetched: %v", ref, name, err)
				continue
			}
			pin.SHA256, pin.Size, pin.ETag = sum, size, m.etag
		}
		if err := writeJSON(c.pinPath(ref.Repo, commit, name), pin); err != nil {
			c.note("%s: %v", ref, err)
		}
	}
	return c.cachedConfigs(ref.Repo, commit)
}

// fileMeta is what the Hub says of a file before it is downloaded.
type fileMeta struct {
	commit, etag string
	size         int64
}

// head asks the Hub for a file's commit, ETag and size as
// huggingface_hub does: HEAD on the resolve URL, following redirects
// within the Hub (a renamed repository) but not to the CDN, whose
// redirect response carries the LFS file's X-Linked-Etag and
// X-Linked-Size.
func (c *Client) head(ctx context.Context, u string) (fileMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, c.MetaTimeout)
	defer cancel()
	hc := &http.Client{Transport: c.transport(), CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cur := u
	for hop := 0; ; hop++ {
		req, err := c.newRequest(ctx, http.MethodHead, cur)
		if err != nil {
			return fileMeta{}, err
		}
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := hc.Do(req)
		if err != nil {
			return fileMeta{}, err
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && hop < 5 {
			loc, err := resp.Location()
			if err != nil {
				return fileMeta{}, fmt.Errorf("%s: redirect without a valid Location: %w", cur, err)
			}
			if from, _ := url.Parse(cur); loc.Host == from.Host {
				cur = loc.String()
				continue
			}
		} else if resp.StatusCode >= 400 {
			return fileMeta{}, statusError(u, resp)
		}
		h := resp.Header
		m := fileMeta{commit: h.Get("X-Repo-Commit"), etag: normalizeETag(h.Get("X-Linked-Etag")), size: -1}
		if m.etag == "" {
			m.etag = normalizeETag(h.Get("ETag"))
		}
		for _, s := range []string{h.Get("X-Linked-Size"), h.Get("Content-Length")} {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
				m.size = n
				break
			}
		}
		if !IsCommit(m.commit) && strings.Contains(u, "/resolve/") {
			return fileMeta{}, fmt.Errorf("%s: the server sent no commit (X-Repo-Commit %q): is %s=%s a Hugging Face Hub?", u, m.commit, EndpointEnv, c.Endpoint)
		}
		return m, nil
	}
}

// normalizeETag strips an ETag's weak marker and quotes.
func normalizeETag(e string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(e), "W/"), `"`)
}

// pickFile lists the repository at the revision (the Hub's API) and
// returns its only .onnx file, else a *ChoiceError listing them.
func (c *Client) pickFile(ctx context.Context, ref Ref) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.MetaTimeout)
	defer cancel()
	u := c.Endpoint + "/api/models/" + ref.Repo + "/revision/" + url.PathEscape(ref.Revision)
	req, err := c.newRequest(ctx, http.MethodGet, u)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: c.transport(), CheckRedirect: dropAuthElsewhere}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", statusError(u, resp)
	}
	var info struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			Name string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&info); err != nil {
		return "", fmt.Errorf("%s: the file list is not the Hub's JSON: %w", u, err)
	}
	var onnx []string
	for _, s := range info.Siblings {
		if strings.EqualFold(path.Ext(s.Name), ".onnx") {
			onnx = append(onnx, s.Name)
		}
	}
	slices.Sort(onnx)
	if len(onnx) != 1 {
		return "", &ChoiceError{Repo: ref.Repo, Revision: ref.Revision, Candidates: onnx}
	}
	if _, err := ParseRef(Scheme + ref.Repo + "/" + onnx[0]); err != nil {
		return "", fmt.Errorf("%s lists %w", u, err)
	}
	return onnx[0], nil
}

// isNetworkError reports whether err means the server could not be
// reached or failed (no answer, a timeout, a 5xx): the cases in which a
// pinned copy in the cache is used instead.
func isNetworkError(err error) bool {
	if err == nil {
		return false
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return he.Status >= 500
	}
	var ne net.Error
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errStalled)
}
