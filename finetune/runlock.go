package finetune

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/setting"
)

// LockFile is the file in a run folder that a running finetune holds an
// exclusive lock on, so that two runs never write into one folder. It
// stays after the run and so also marks the folder as segtune's: a run
// starts only in a folder that is new, empty or marked (see claimRunDir).
const LockFile = ".segtune.lock"

// NotRunDirError reports a run folder that holds files and is not a
// segtune run folder: finetune would replace a user's model.onnx,
// config.json or metrics.jsonl.
type NotRunDirError struct {
	Dir   string
	Files []string // a few of the names it holds
}

func (e *NotRunDirError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *NotRunDirError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "finetune: {run_dir} %s is not empty (it holds %s) and is not a segtune run folder (no %s): "+
		"finetune writes %s, %s, %s, %s and checkpoints there and would replace files of the same names; "+
		"choose a new or empty folder, or move its files elsewhere",
		e.Dir, strings.Join(e.Files, ", "), LockFile, ModelFile, ConfigFile, HistoryFile, PlotFile)
}

// claimRunDir refuses a run folder that exists, holds files and is not
// segtune's. A folder is segtune's when it holds LockFile (every run
// since the lock writes it) or checkpoints (runs from before): the later
// checks then decide between resuming (which verifies last.ckpt) and
// refusing an earlier run's checkpoints (refuseLeftovers).
func claimRunDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &setting.Error{Setting: "run_dir", Value: dir, Err: err}
	}
	var names []string
	for _, e := range entries {
		if e.Name() == LockFile || strings.HasSuffix(e.Name(), ".ckpt") {
			return nil
		}
		if len(names) < 5 {
			names = append(names, e.Name())
		}
	}
	if len(entries) == 0 {
		return nil
	}
	if len(entries) > len(names) {
		names = append(names, fmt.Sprintf("and %d more", len(entries)-len(names)))
	}
	return &NotRunDirError{Dir: dir, Files: names}
}

// runLock is an exclusive advisory lock (flock) on a run folder's
// LockFile. The kernel releases it when the process exits, however it
// exits (a crash or SIGKILL included), so a stale lock never blocks a
// later run. The file itself is left in place: removing it would let a
// third run lock a fresh inode while the second still holds the old one.
type runLock struct{ f *os.File }

// lockRunDir refuses a folder that is not a run's (claimRunDir), creates
// dir if needed and locks it, or fails at once when another process holds
// the lock, naming that process when it can.
func lockRunDir(dir string) (*runLock, error) {
	if err := claimRunDir(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("finetune: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("finetune: %s is not a regular file; remove it to use %s", path, dir)
	}
	// Opened in place rather than through atomicfile: every run must
	// lock the same inode. O_NOFOLLOW keeps a planted link from being
	// created or truncated through.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("finetune: locking %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner := ""
		if b := make([]byte, 32); true {
			if n, _ := f.ReadAt(b, 0); n > 0 {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n]))); err == nil {
					owner = fmt.Sprintf(" (process %d)", pid)
				}
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("finetune: %s is in use by another segtune finetune run%s: wait for it to finish or choose another run folder", dir, owner)
		}
		return nil, fmt.Errorf("finetune: locking %s: %w", dir, err)
	}
	// Record the holder for the message above; the lock, not the
	// contents, is what counts.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	// Temporary files of an earlier, killed run in this folder.
	atomicfile.RemoveStale(dir)
	return &runLock{f: f}, nil
}

// release unlocks the folder (closing the file drops the flock).
func (l *runLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
