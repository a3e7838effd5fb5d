// Package regfile is how segtune opens the files it reads: models,
// external data, sidecars, preprocessing files, checkpoints, images,
// masks, palettes. It only ever reads regular files: a FIFO would block
// the program forever, and a device such as /dev/zero would stream
// without end. Small files (JSON, palettes) are also read with a size
// limit.
package regfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/segtune/segtune/internal/atomicfile"
)

// Open opens path for reading after checking that it (or the file a
// symbolic link at path points to) is a regular file. The check comes
// before the open, which on a FIFO would block, and is repeated on the open
// file, which is opened non-blocking so that a file swapped for a FIFO in
// between cannot hang either.
func Open(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	if err := Check(path, fi); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err = f.Stat()
	if err == nil {
		err = Check(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// Check returns an error unless fi describes a regular file.
func Check(path string, fi fs.FileInfo) error {
	if fi.Mode().IsRegular() {
		return nil
	}
	return &NotRegularError{Path: path, Mode: fi.Mode()}
}

// NotRegularError reports a path that is not a regular file.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
}

func (e *NotRegularError) Error() string {
	return fmt.Sprintf("%s is %s, not a regular file", e.Path, atomicfile.Describe(e.Mode))
}

// ErrNotRegular is matched by errors.Is for a NotRegularError.
var ErrNotRegular = errors.New("not a regular file")

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// TooLargeError reports a file over the limit of ReadSmall.
type TooLargeError struct {
	Path  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes, the limit for this kind of file", e.Path, e.Limit)
}

// ReadSmall reads the whole of the regular file at path, refusing one
// larger than limit bytes (checked from its size and again while reading,
// since a file may grow).
func ReadSmall(path string, limit int64) ([]byte, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return data, nil
}

// SmallLimit is the default limit for small files: JSON sidecars,
// preprocessing files, palettes, label maps (16 MiB).
const SmallLimit = 16 << 20

// SHA256 returns the hex SHA-256 of the regular file at path, reading no
// more than the size it had when opened: how segtune names a model's or a
// checkpoint's base model's content.
func SHA256(path string) (string, error) {
	f, fi, err := Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, fi.Size())); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// OpenLimit opens the regular file at path for streaming, refusing one
// larger than limit bytes: from its size when opened, and again while
// reading, where reading past limit bytes is a *TooLargeError.
func OpenLimit(path string, limit int64) (io.ReadCloser, error) {
	f, fi, err := Open(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		f.Close()
		return nil, &TooLargeError{Path: path, Limit: limit}
	}
	return &limitReader{f: f, path: path, limit: limit, left: limit}, nil
}

type limitReader struct {
	f           *os.File
	path        string
	limit, left int64
}

func (r *limitReader) Read(p []byte) (int, error) {
	if r.left < 0 {
		return 0, &TooLargeError{Path: r.path, Limit: r.limit}
	}
	if int64(len(p)) > r.left+1 { // one byte past the limit tells a larger file
		p = p[:r.left+1]
	}
	n, err := r.f.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n, &TooLargeError{Path: r.path, Limit: r.limit}
	}
	return n, err
}

func (r *limitReader) Close() error { return r.f.Close() }
