package evaluate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/metrics"
)

// ErrNotFolder is a confusion folder that is a file.
var ErrNotFolder = errors.New("not a folder")

// ForeignFileError is a file of a confusion file's name that segtune did
// not write (a user's confusion.csv, say): it is never replaced.
type ForeignFileError struct{ Path string }

func (e *ForeignFileError) Error() string {
	return fmt.Sprintf("%s exists and was not written by segtune eval; choose another folder or move it", e.Path)
}

// ConfusionDirError refuses a folder for the confusion files
// (metrics.WriteConfusionFiles): Input is the index, among the inputs
// given to CheckConfusionDir, of the input folder it is (-1: it is not
// one; Err says what is wrong).
type ConfusionDirError struct {
	Dir   string
	Input int
	Err   error
}

func (e *ConfusionDirError) Error() string {
	if e.Input >= 0 {
		return fmt.Sprintf("%s is input folder %d; choose a folder of its own", e.Dir, e.Input)
	}
	return e.Dir + ": " + e.Err.Error()
}

func (e *ConfusionDirError) Unwrap() error { return e.Err }

// CheckConfusionDir refuses, before the work, a folder for the confusion
// files that is a file, one of the local input folders inputs (whose
// files they could overwrite), or that holds a confusion.csv or
// confusion.png segtune did not write (ForeignFileError); inputs that are
// not local folders (URLs) are passed over. Errors are
// *ConfusionDirError.
func CheckConfusionDir(dir string, inputs ...string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return &ConfusionDirError{Dir: dir, Input: -1, Err: ErrNotFolder}
	}
	at, err := pathguard.Resolve(dir)
	if err != nil {
		return &ConfusionDirError{Dir: dir, Input: -1, Err: err}
	}
	for i, in := range inputs {
		if _, err := os.Stat(in); err != nil {
			continue
		}
		if r, err := pathguard.Resolve(in); err == nil && r == at {
			return &ConfusionDirError{Dir: dir, Input: i}
		}
	}
	if err := checkOwnConfusionFiles(dir); err != nil {
		return &ConfusionDirError{Dir: dir, Input: -1, Err: err}
	}
	return nil
}

// checkOwnConfusionFiles refuses a confusion.csv whose first cell is not
// metrics.ConfusionCSVHeader, and a confusion.png without the mark
// metrics.ConfusionMark unless the CSV beside it is segtune's (earlier
// versions wrote the heat map unmarked). Anything but a regular file of
// those names is refused too.
func checkOwnConfusionFiles(dir string) error {
	csvPath, pngPath := filepath.Join(dir, "confusion.csv"), filepath.Join(dir, "confusion.png")
	head, csvExists, err := readHead(csvPath, len(metrics.ConfusionCSVHeader)+1)
	if err != nil {
		return err
	}
	ownCSV := string(head) == metrics.ConfusionCSVHeader+","
	if csvExists && !ownCSV {
		return &ForeignFileError{Path: csvPath}
	}
	if _, err := os.Lstat(pngPath); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	f, _, err := regfile.Open(pngPath)
	if err != nil {
		return err
	}
	defer f.Close()
	mark, _, err := imageio.ReadPNGText(f, imageio.OutputMarkKey)
	if mark != metrics.ConfusionMark && (err != nil || !ownCSV) {
		return &ForeignFileError{Path: pngPath}
	}
	return nil
}

// readHead reads up to n bytes from the start of the regular file path;
// exists is false where there is no file.
func readHead(path string, n int) (head []byte, exists bool, err error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	f, _, err := regfile.Open(path)
	if err != nil {
		return nil, true, err
	}
	defer f.Close()
	head, err = io.ReadAll(io.LimitReader(f, int64(n)))
	return head, true, err
}
