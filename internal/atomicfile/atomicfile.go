// Package atomicfile is segtune's one writer of output files. A file is
// written to a hidden temporary file in its destination folder, synced,
// and renamed over the destination, so that readers and crashes see either
// the old file or the complete new one.
//
// Every step goes through a handle on the destination folder (os.Root):
// the temporary file is created there exclusively, and renamed within that
// folder, so nothing is ever opened or replaced through a symbolic link,
// and a folder swapped for a link midway is not followed. Only a regular
// file (or a missing one) is ever replaced: a symbolic link, a FIFO, a
// device node, a socket or a folder at the destination is refused with a
// *DestinationError, so that an output folder holding a link to
// /etc/passwd, written as root, leaves /etc/passwd alone, and an output
// path such as /dev/null or a named pipe is never swapped for a file.
//
// Temporary files are named ".BASE.tmp-PID-RANDOM"; RemoveStale deletes
// those left by processes that no longer run.
package atomicfile

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Write writes data to path atomically with permissions perm.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFunc(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFunc writes the output of write to path atomically with
// permissions perm. write receives a buffered writer. On any error the
// temporary file is removed and path is left as it was.
func WriteFunc(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	return WriteWrapped(path, perm, nil, write)
}

// WriteWrapped is WriteFunc with wrap applied to the file writer (for
// tests that simulate a failing disk); wrap may be nil.
func WriteWrapped(path string, perm os.FileMode, wrap func(io.Writer) io.Writer, write func(w io.Writer) error) (err error) {
	dir, base := split(path)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer root.Close()
	if err = checkEntry(root, path, base); err != nil {
		return err
	}
	f, tmp, err := createTemp(root, base)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	var w io.Writer = f
	if wrap != nil {
		w = wrap(f)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if err = write(bw); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// On disk before the rename, so a crash cannot expose an empty file
	// under the final name.
	if err = f.Sync(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// The destination may have changed type while we wrote. Whatever
	// appears after this check, the rename replaces the entry itself and
	// never writes through it.
	if err = checkEntry(root, path, base); err != nil {
		return err
	}
	if err = root.Rename(tmp, base); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// The rename is durable only once the folder's entry is on disk.
	if d, derr := root.Open("."); derr == nil {
		if serr := d.Sync(); serr != nil && !errors.Is(serr, errors.ErrUnsupported) && !errors.Is(serr, syscall.EINVAL) {
			d.Close()
			return fmt.Errorf("writing %s: syncing its folder: %w", path, serr)
		}
		d.Close()
	}
	return nil
}

// split returns the folder of path and the name of path in it; a path
// that names a folder ("a/..", "dir/") has the name "." so that it is
// refused as a folder.
func split(path string) (dir, base string) {
	dir, base = filepath.Split(filepath.Clean(path))
	if dir == "" {
		dir = "."
	}
	if base == "" { // the root folder
		base = "."
	}
	return dir, base
}

// createTemp creates a new temporary file for the destination base in
// root, exclusively (O_EXCL never opens an existing file or a link).
func createTemp(root *os.Root, base string) (*os.File, string, error) {
	prefix := TempPrefix(base) + strconv.Itoa(os.Getpid()) + "-"
	for try := 0; ; try++ {
		var b [6]byte
		rand.Read(b[:])
		name := prefix + hex.EncodeToString(b[:])
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 10 {
			continue
		}
		return f, name, err
	}
}

// DestinationError reports an output path whose current entry is not a
// regular file: segtune refuses to replace it or to write through it.
type DestinationError struct {
	Path   string
	Mode   fs.FileMode // the entry's type, not following a link
	LinkTo string      // a symbolic link's target
}

func (e *DestinationError) Error() string {
	if e.Mode&fs.ModeSymlink != 0 {
		return fmt.Sprintf("writing %s: refusing to write through a symbolic link (to %s): remove the link or choose another name", e.Path, e.LinkTo)
	}
	return fmt.Sprintf("writing %s: refusing to replace it: it is %s, not a regular file", e.Path, Describe(e.Mode))
}

// checkEntry refuses a destination base in root that exists and is not a
// regular file; path is the destination as the caller named it.
func checkEntry(root *os.Root, path, base string) error {
	fi, err := root.Lstat(base)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("writing %s: %w", path, err)
	case fi.Mode().IsRegular():
		return nil
	}
	e := &DestinationError{Path: path, Mode: fi.Mode()}
	if fi.Mode()&fs.ModeSymlink != 0 {
		e.LinkTo, _ = root.Readlink(base)
	}
	return e
}

// Target returns the file that writing path replaces: path itself. It
// refuses, with a *DestinationError, a destination that exists and is not
// a regular file, a symbolic link included, so that callers can refuse an
// output before any work.
func Target(path string) (string, error) {
	dir, base := split(path)
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return path, nil // created when written (or refused then)
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	defer root.Close()
	if err := checkEntry(root, path, base); err != nil {
		return "", err
	}
	return path, nil
}

// ClearCacheEntry prepares path, an entry of a cache that is segtune's
// own, for a write: an entry there that is not a regular file (a symbolic
// link, a FIFO, a device, a socket) is removed itself, never followed or
// opened, where Write would refuse it. A folder is left in place: the
// write then names it.
func ClearCacheEntry(path string) {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		os.Remove(path)
	}
}

// Describe names the type of a file mode in words ("a named pipe (FIFO)").
func Describe(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a folder"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}

// TempPrefix is the prefix of the temporary files written for a
// destination named base.
func TempPrefix(base string) string { return "." + base + ".tmp-" }

// IsTemp reports whether a file name follows the temporary-file pattern.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// legacyAge is how old a temporary file without a process id must be
// before RemoveStale deletes it.
const legacyAge = time.Hour

// RemoveStale deletes, in dir, the regular files that follow segtune's
// temporary-file pattern and were left by a process that is no longer
// running (or, for names without a process id, that are older than an
// hour). It returns the names removed. Nothing else is touched.
func RemoveStale(dir string) []string { return RemoveStaleOf(dir, nil) }

// RemoveStaleOf is RemoveStale for the temporary files of the destinations
// whose base names dest accepts (all of them when dest is nil): a writer
// that owns some names of a shared folder cleans up after itself only.
func RemoveStaleOf(dir string, dest func(base string) bool) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !IsTemp(name) {
			continue
		}
		if dest != nil && !dest(name[1:strings.LastIndex(name, ".tmp-")]) {
			continue
		}
		if !stale(e, name) {
			continue
		}
		if os.Remove(filepath.Join(dir, name)) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}

func stale(e fs.DirEntry, name string) bool {
	rest := name[strings.LastIndex(name, ".tmp-")+len(".tmp-"):]
	if i := strings.IndexByte(rest, '-'); i > 0 {
		if pid, err := strconv.Atoi(rest[:i]); err == nil && pid > 0 {
			if pid == os.Getpid() {
				return false
			}
			err := syscall.Kill(pid, 0)
			return errors.Is(err, syscall.ESRCH)
		}
	}
	fi, err := e.Info()
	return err == nil && time.Since(fi.ModTime()) > legacyAge
}
