package finetune

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/export"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
)

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

// BaseDigestError refuses a base model that is not the one a checkpoint
// was trained from (export.BaseDigestError).
type BaseDigestError = export.BaseDigestError

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
		if err := export.CheckBaseDigest(path, ck.BaseSHA256, ckPath, log); err != nil {
			return "", err
		}
	}
	return regfile.SHA256(path)
}
