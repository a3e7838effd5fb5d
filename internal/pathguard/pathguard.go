// Package pathguard tells whether one path or folder lies in another, with
// symbolic links resolved, so that a command can refuse to write its
// outputs among its inputs.
package pathguard

import (
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/internal/storage"
)

// Resolve returns path absolute and with symbolic links resolved; the
// part that does not exist yet is appended as written.
func Resolve(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest), nil
		}
		if filepath.Dir(p) == p {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// Within reports whether path is dir or inside it (both resolved).
func Within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Overlapping reports whether folder a is folder b, or one is inside the
// other: local folders compared as absolute paths with symbolic links
// resolved, bucket folders by scheme, bucket and prefix. A local folder
// and a bucket folder never overlap. A file:// URL must have been turned
// into its path before the folder was opened.
func Overlapping(a, b *storage.Folder) (bool, error) {
	if a.IsLocal() != b.IsLocal() {
		return false, nil
	}
	if !a.IsLocal() {
		return a.Within(b) || b.Within(a), nil
	}
	return Overlap(a.Location().Local, b.Location().Local)
}

// Overlap reports whether the local paths a and b are one folder, or one
// lies inside the other, with symbolic links resolved.
func Overlap(a, b string) (bool, error) {
	ra, err := Resolve(a)
	if err != nil {
		return false, err
	}
	rb, err := Resolve(b)
	if err != nil {
		return false, err
	}
	return Within(ra, rb) || Within(rb, ra), nil
}
