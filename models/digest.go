package models

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/segtune/segtune/internal/regfile"
)

// synthDigest is the SHA-256 of the embedded segtune-synth model, computed
// once on first use.
var synthDigest = sync.OnceValue(func() string {
	sum := sha256.Sum256(SynthModel)
	return hex.EncodeToString(sum[:])
})

// Digest returns the hex SHA-256 of the entry's model file ("" when the
// registry does not know it).
func (e Entry) Digest() string {
	if e.Embedded && e.Name == SynthName {
		return synthDigest()
	}
	return strings.ToLower(e.SHA256)
}

// FileDigest returns the hex SHA-256 of the file at path. Only a regular
// file is read (a FIFO would block, /dev/zero stream without end), and
// no more than the size it had when opened.
func FileDigest(path string) (string, error) {
	f, fi, err := regfile.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, fi.Size())); err != nil {
		return "", fmt.Errorf("models: %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// LookupDigest returns the known model whose file has the hex SHA-256
// digest, if any.
func LookupDigest(digest string) (Entry, bool) {
	digest = strings.ToLower(strings.TrimSpace(digest))
	if digest == "" {
		return Entry{}, false
	}
	for _, e := range known {
		if e.Digest() == digest {
			return e.clone(), true
		}
	}
	return Entry{}, false
}

// Size returns the size in bytes of the entry's model file (0 when the
// registry does not know it).
func (e Entry) Size() int64 {
	if e.Embedded && e.Name == SynthName {
		return int64(len(SynthModel))
	}
	return e.Bytes
}

// Recognize reports which known model the file at path is, by the SHA-256
// of its content: a renamed or moved copy is still recognised, a modified
// one is not. Only a file whose size is a known model's is read.
func Recognize(path string) (Entry, bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Entry{}, false, err
	}
	if !slices.ContainsFunc(known, func(e Entry) bool { return e.Size() == st.Size() }) {
		return Entry{}, false, nil
	}
	d, err := FileDigest(path)
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := LookupDigest(d)
	return e, ok, nil
}
