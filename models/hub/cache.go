package hub

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
)

// The cache, under Client.CacheDir, is laid out as huggingface_hub lays
// out its own (so that it reads familiarly), plus a pin per file:
//
//	models--OWNER--REPO/refs/REVISION         the commit a branch or tag was last seen at
//	models--OWNER--REPO/snapshots/COMMIT/FILE the file as the repository held it
//	models--OWNER--REPO/pins/COMMIT/FILE.json its Pin (SHA-256, size, ETag…)
//	models--OWNER--REPO/.locks, .incomplete   download locks and partial files
//	urls/HASH/NAME, urls/HASH/pin.json        a plain URL's file and its Pin
//
// A file counts as cached only with its pin, written after the file: a
// download interrupted at any point leaves no file that looks complete.

// Pin records what was downloaded: where from, at which commit, and the
// checksum that every later use checks.
type Pin struct {
	// Source is the reference or URL as the user wrote it.
	Source string `json:"source"`
	Repo   string `json:"repo,omitempty"`
	// Revision is the revision asked for; Commit the one it resolved to.
	Revision string `json:"revision,omitempty"`
	Commit   string `json:"commit,omitempty"`
	File     string `json:"file,omitempty"`
	URL      string `json:"url"`
	SHA256   string `json:"sha256,omitempty"`
	Size     int64  `json:"size"`
	ETag     string `json:"etag,omitempty"`
	// Absent records that the repository has no such file at the commit
	// (an optional file: a configuration), so offline use need not ask.
	Absent     bool      `json:"absent,omitempty"`
	Downloaded time.Time `json:"downloaded"`
}

// repoDir is the cache folder of a repository.
func (c *Client) repoDir(repo string) string {
	return filepath.Join(c.CacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

func (c *Client) snapshotPath(repo, commit, file string) string {
	return filepath.Join(c.repoDir(repo), "snapshots", commit, filepath.FromSlash(file))
}

func (c *Client) pinPath(repo, commit, file string) string {
	return filepath.Join(c.repoDir(repo), "pins", commit, filepath.FromSlash(file)+".json")
}

func (c *Client) refPath(repo, rev string) string {
	return filepath.Join(c.repoDir(repo), "refs", filepath.FromSlash(rev))
}

// urlDir is the cache folder of a plain URL (its fragment left out).
func (c *Client) urlDir(u string) string {
	return filepath.Join(c.CacheDir, "urls", shortHash(u))
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// readRef returns the commit a revision was last resolved to, or "".
func (c *Client) readRef(repo, rev string) string {
	if IsCommit(rev) {
		return rev
	}
	data, err := regfile.ReadSmall(c.refPath(repo, rev), 256)
	if err != nil {
		return ""
	}
	if s := strings.TrimSpace(string(data)); IsCommit(s) {
		return s
	}
	return ""
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'), 0o644)
}

// readPin reads a pin; a missing one is (nil, nil).
func readPin(path string) (*Pin, error) {
	data, err := regfile.ReadSmall(path, 1<<16)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Pin
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &p, nil
}

// verify checks that the file at path is the one p recorded: a regular
// file of its size and SHA-256. A mismatch is a *TamperedError.
func verify(path string, p *Pin) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &TamperedError{Path: path, Want: p.SHA256, Got: "(" + fi.Mode().Type().String() + ", not a regular file)"}
	}
	got, err := regfile.SHA256(path)
	if err != nil {
		return err
	}
	if fi.Size() != p.Size || got != p.SHA256 {
		return &TamperedError{Path: path, Want: p.SHA256, Got: got}
	}
	return nil
}

// gitBlobSHA1 is the git object id of the file's content: the ETag the
// Hub gives a file kept in git rather than LFS.
func gitBlobSHA1(path string, size int64) (string, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", size)
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LookupPin returns the pin of a file in a cache folder's snapshots and
// the snapshot's root (the repository's top folder), or nil when path is
// not such a file.
func LookupPin(cacheDir, path string) (*Pin, string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", nil
	}
	rel, err := filepath.Rel(cacheDir, abs)
	if err != nil || !filepath.IsLocal(rel) {
		return nil, "", nil
	}
	parts := strings.SplitN(filepath.ToSlash(rel), "/", 4)
	if len(parts) < 4 || !strings.HasPrefix(parts[0], "models--") || parts[1] != "snapshots" || !IsCommit(parts[2]) {
		return nil, "", nil
	}
	p, err := readPin(filepath.Join(cacheDir, parts[0], "pins", parts[2], filepath.FromSlash(parts[3])+".json"))
	if p == nil || err != nil {
		return nil, "", err
	}
	return p, filepath.Join(cacheDir, parts[0], "snapshots", parts[2]), nil
}

// Cached lists the pins of the models (.onnx files) in the cache.
func Cached(cacheDir string) ([]Pin, error) {
	var pins []Pin
	err := filepath.WalkDir(cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == cacheDir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return nil
		}
		if d.IsDir() || !(strings.HasSuffix(p, ".onnx.json") && strings.Contains(p, string(filepath.Separator)+"pins"+string(filepath.Separator)) ||
			d.Name() == "pin.json") {
			return nil
		}
		if pin, err := readPin(p); err == nil && pin != nil && !pin.Absent {
			pins = append(pins, *pin)
		}
		return nil
	})
	return pins, err
}
