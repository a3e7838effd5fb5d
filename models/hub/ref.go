// Package hub downloads models from the Hugging Face Hub (hf:OWNER/REPO
// [/FILE.onnx][@REVISION]) and from plain https URLs into segtune's
// cache, pinned and checked: the Hub's commit and the file's SHA-256 are
// recorded, a branch's commit is resolved and recorded, a partial
// download resumes, two processes never download one file at once, and a
// pinned copy serves offline. It speaks the Hub's HTTP protocol as
// huggingface_hub does (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE).
package hub

import (
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Scheme prefixes a Hub model reference.
const Scheme = "hf:"

// DefaultRevision is the revision used when a reference names none.
const DefaultRevision = "main"

// Ref names a file of a Hub model repository at a revision.
type Ref struct {
	Repo string // OWNER/REPO
	// File is the path of the .onnx file in the repository; empty means
	// the repository's only .onnx file.
	File string
	// Revision is a branch, a tag or a commit hash.
	Revision string
}

// String is the reference as written (hf:OWNER/REPO/FILE@REVISION).
func (r Ref) String() string {
	s := Scheme + r.Repo
	if r.File != "" {
		s += "/" + r.File
	}
	return s + "@" + r.Revision
}

var (
	repoPartRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	revisionRE = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._/-]*$`)
	commitRE   = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// IsRef reports whether v is written as a Hub reference (hf:…).
func IsRef(v string) bool { return strings.HasPrefix(v, Scheme) }

// IsCommit reports whether a revision is a full commit hash, which
// names one immutable state of a repository.
func IsCommit(rev string) bool { return commitRE.MatchString(rev) }

// ParseRef parses hf:OWNER/REPO[/FILE.onnx][@REVISION].
func ParseRef(v string) (Ref, error) {
	bad := func(why string) (Ref, error) {
		return Ref{}, fmt.Errorf("%q: %s (want hf:OWNER/REPO[/FILE.onnx][@REVISION])", v, why)
	}
	if !IsRef(v) {
		return bad("not a Hub reference")
	}
	s := strings.TrimPrefix(v, Scheme)
	r := Ref{Revision: DefaultRevision}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		r.Revision, s = s[i+1:], s[:i]
		if !revisionRE.MatchString(r.Revision) || strings.Contains(r.Revision, "..") {
			return bad(fmt.Sprintf("revision %q is no branch, tag or commit name", r.Revision))
		}
	}
	parts := strings.SplitN(s, "/", 3)
	if len(parts) < 2 {
		return bad("no repository")
	}
	for _, p := range parts[:2] {
		if !repoPartRE.MatchString(p) || strings.Contains(p, "..") {
			return bad(fmt.Sprintf("%q is no valid owner or repository name", p))
		}
	}
	r.Repo = parts[0] + "/" + parts[1]
	if len(parts) == 3 {
		r.File = parts[2]
		if !filepath.IsLocal(filepath.FromSlash(r.File)) || path.Clean(r.File) != r.File {
			return bad(fmt.Sprintf("file %q is not a plain path inside the repository", r.File))
		}
		if !strings.EqualFold(path.Ext(r.File), ".onnx") {
			return bad(fmt.Sprintf("file %q is not an .onnx file", r.File))
		}
	}
	return r, nil
}
