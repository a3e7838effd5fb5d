package evaluate

import (
	"errors"
	"fmt"
	"os"

	"github.com/segtune/segtune/internal/pathguard"
)

// ErrNotFolder is a confusion folder that is a file.
var ErrNotFolder = errors.New("not a folder")

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
// files that is a file or one of the local input folders inputs (whose
// files they could overwrite); inputs that are not local folders (URLs)
// are passed over. Errors are *ConfusionDirError.
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
	return nil
}
