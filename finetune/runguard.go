package finetune

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
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
	return fmt.Errorf("finetune: %s holds checkpoints of an earlier run (%s) but no %s to continue from: "+
		"move them elsewhere or choose another --out (segtune neither reuses nor deletes them)",
		dir, strings.Join(found, ", "), checkpoint.LastName)
}

// identify gives the run its id (a resumed run keeps its checkpoint's)
// and refuses a folder holding another run's checkpoints.
func (t *trainer) identify(ck *checkpoint.Checkpoint) error {
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
