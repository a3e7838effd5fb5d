package hub

import (
	"fmt"
	"net/http"
	"strings"
)

// HTTPError is a request the server refused: 401/403 (a gated or private
// repository), 404 (no such repository, revision or file) or another
// status. Code and Message are the Hub's X-Error-Code and
// X-Error-Message, when it sent them.
type HTTPError struct {
	URL           string
	Status        int
	Code, Message string
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Code != "" || e.Message != "" {
		s += " (" + strings.TrimPrefix(strings.TrimSpace(e.Code+": "+e.Message), ": ") + ")"
	}
	switch {
	case e.Code == "GatedRepo":
		return s + ": the repository is gated; accept its conditions on its page and set HF_TOKEN to a token of that account"
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return s + ": the repository is private or gated, or does not exist; set HF_TOKEN to a token with access (or log in with `hf auth login`)"
	case e.Code == "RevisionNotFound":
		return s + ": no such branch, tag or commit"
	case e.Code == "EntryNotFound":
		return s + ": no such file at this revision"
	case e.Code == "RepoNotFound":
		return s + ": no such repository"
	}
	return s
}

// ChecksumError is a downloaded file whose content is not the one the
// server (or the reference) announced; it is not kept.
type ChecksumError struct {
	URL       string
	Algorithm string // "sha256", or "git-sha1" for a file kept in git
	Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: downloaded file's %s is %s, want %s: the download is corrupt or the server sent another file; discarded",
		e.URL, e.Algorithm, e.Got, e.Want)
}

// TransferError is a download that failed on the way (connection, stall,
// truncated body) after its retries; the partial file is kept for the
// next attempt to resume.
type TransferError struct {
	URL string
	Err error
}

func (e *TransferError) Error() string { return e.URL + ": " + e.Err.Error() }
func (e *TransferError) Unwrap() error { return e.Err }

// OfflineError is a model asked for while offline (HF_HUB_OFFLINE, or
// the network failing) that the cache holds no pinned copy of.
type OfflineError struct {
	Target string
	// Cause is the network failure, or nil under HF_HUB_OFFLINE.
	Cause error
}

func (e *OfflineError) Error() string {
	why := OfflineEnv + " is set"
	if e.Cause != nil {
		why = "the network failed (" + e.Cause.Error() + ")"
	}
	return fmt.Sprintf("%s: %s and the cache holds no pinned copy of it; download it once while online", e.Target, why)
}

func (e *OfflineError) Unwrap() error { return e.Cause }

// TamperedError is a cached file whose content no longer matches the
// checksum recorded when it was downloaded.
type TamperedError struct {
	Path      string
	Want, Got string
}

func (e *TamperedError) Error() string {
	return fmt.Sprintf("cached %s has SHA-256 %s but %s was recorded when it was downloaded: it was changed or damaged; delete it to download it again", e.Path, e.Got, e.Want)
}

// ChoiceError is a repository asked for without a file that holds no
// .onnx file, or more than one.
type ChoiceError struct {
	Repo, Revision string
	Candidates     []string
}

func (e *ChoiceError) Error() string {
	if len(e.Candidates) == 0 {
		return fmt.Sprintf("hf:%s@%s holds no .onnx file", e.Repo, e.Revision)
	}
	return fmt.Sprintf("hf:%s@%s holds %d .onnx files; name one: %s", e.Repo, e.Revision, len(e.Candidates),
		"hf:"+e.Repo+"/"+strings.Join(e.Candidates, ", hf:"+e.Repo+"/"))
}
