// Package atomicfile is segtune's one writer of output files. A file is
// written to a hidden temporary file in its destination folder, synced,
// and renamed over the destination, so that readers and crashes see either
// the old file or the complete new one. Only a regular file (or a missing
// one) is ever replaced: a FIFO, a device node, a socket or a folder at the
// destination is refused, so that an output path such as /dev/null or a
// named pipe is never swapped for a regular file. A symbolic link at the
// destination is refused too: writing through it would replace whatever it
// points at, outside the folder the user chose (an output folder holding a
// link to /etc/passwd, written as root, replaced /etc/passwd).
//
// Temporary files are named ".BASE.tmp-PID-RANDOM"; RemoveStale deletes
// those left by processes that no longer run.
package atomicfile

import (
	"bufio"
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
	target, err := Target(path)
	if err != nil {
		return err
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix(base)+strconv.Itoa(os.Getpid())+"-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
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
	// The destination may have changed type while we wrote.
	if err = checkTarget(path, target); err != nil {
		return err
	}
	if err = os.Rename(tmp, target); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	// The rename is durable only once the folder's entry is on disk.
	if d, derr := os.Open(dir); derr == nil {
		if serr := d.Sync(); serr != nil && !errors.Is(serr, errors.ErrUnsupported) && !errors.Is(serr, syscall.EINVAL) {
			d.Close()
			return fmt.Errorf("writing %s: syncing its folder: %w", path, serr)
		}
		d.Close()
	}
	return nil
}

// Target returns the file that writing path replaces: path itself. It
// refuses a destination that exists and is not a regular file, a symbolic
// link included.
func Target(path string) (string, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		to, _ := os.Readlink(path)
		return "", fmt.Errorf("writing %s: refusing to write through a symbolic link (to %s): remove the link or choose another name", path, to)
	}
	return path, checkTarget(path, path)
}

func checkTarget(path, target string) error {
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("writing %s: %w", path, err)
	case fi.Mode().IsRegular():
		return nil
	}
	return fmt.Errorf("writing %s: refusing to replace %s, which is %s, not a regular file", path, target, Describe(fi.Mode()))
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
