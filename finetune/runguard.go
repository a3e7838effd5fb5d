package finetune

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
)

// Warnings receives the package's warnings that have no run log to go
// to (a checkpoint without a base-model digest); nil discards them.
var Warnings io.Writer = os.Stderr

// newRunID returns a random identifier for a new run, recorded in each
// of its checkpoints.
func newRunID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// refuseLeftovers refuses to start a run (or to resume one that has no
// last.ckpt) in a folder that holds checkpoints: they belong to another
// run, and using them (a leftover best.ckpt would be ranked against and
// exported) or replacing them would be wrong. segtune neither reuses nor
// deletes them; the user moves them or picks another folder.
func refuseLeftovers(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // a missing folder holds nothing
	}
	var found []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".ckpt") {
			found = append(found, e.Name())
		}
	}
	if len(found) == 0 {
		return nil
	}
	sort.Strings(found)
	return &LeftoverCheckpointsError{Dir: dir, Found: found}
}

// LeftoverCheckpointsError refuses a run folder, Dir, holding checkpoints
// (Found) of another run and no last checkpoint to continue from.
type LeftoverCheckpointsError struct {
	Dir   string
	Found []string
}

func (e *LeftoverCheckpointsError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *LeftoverCheckpointsError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "finetune: %s holds checkpoints of an earlier run (%s) but no %s to continue from: "+
		"move them elsewhere or choose another {run_dir} (segtune neither reuses nor deletes them)",
		e.Dir, strings.Join(e.Found, ", "), checkpoint.LastName)
}

// BaseDigestError refuses a base model, Path, whose SHA-256 (Got) is not
// the one the checkpoint Checkpoint records (Recorded): the file was
// replaced, or it is another model.
type BaseDigestError struct{ Path, Checkpoint, Got, Recorded string }

func (e *BaseDigestError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *BaseDigestError) Named(name func(key string) string) string {
	return setting.Sprintf(name, "%s is not the base model %s was trained from: its SHA-256 is %s, the checkpoint records %s (the file was replaced or {network.base_model} names another model)",
		e.Path, e.Checkpoint, e.Got[:min(12, len(e.Got))]+"…", e.Recorded[:min(12, len(e.Recorded))]+"…")
}

// checkBaseDigest compares the base model at path with the digest a
// checkpoint recorded. A checkpoint from before digests were recorded
// (empty digest) is accepted with a warning on log.
func checkBaseDigest(path, recorded, ckpt string, log io.Writer) error {
	if recorded == "" {
		if log != nil {
			fmt.Fprintf(log, "warning: %s records no SHA-256 of its base model; cannot check that %s is the model it was trained from\n", ckpt, path)
		}
		return nil
	}
	got, err := regfile.SHA256(path)
	if err != nil {
		return err
	}
	if got != recorded {
		return &BaseDigestError{Path: path, Checkpoint: filepath.Base(ckpt), Got: got, Recorded: recorded}
	}
	return nil
}

// identify gives the run its id (a resumed run keeps its checkpoint's)
// and refuses a folder holding another run's checkpoints.
func (t *runner) identify(ck *checkpoint.Checkpoint) error {
	if ck != nil {
		t.keeper.RunID = ck.RunID
		return nil
	}
	if err := refuseLeftovers(t.dir); err != nil {
		return err
	}
	t.keeper.RunID = newRunID()
	return nil
}

// baseDigest returns the SHA-256 of the base model at path; resuming, the
// model must be the one the checkpoint was trained from.
func baseDigest(path string, ck *checkpoint.Checkpoint, ckPath string, log io.Writer) (string, error) {
	if ck != nil {
		if err := checkBaseDigest(path, ck.BaseSHA256, ckPath, log); err != nil {
			return "", err
		}
	}
	return regfile.SHA256(path)
}
