package finetune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/atomicfile"
)

// SplitFile, in a run folder whose validation data is held out of its
// training data (DataSpec.ValSplit), lists which images went where.
const SplitFile = "split.json"

// SplitList is SplitFile's content: the split's settings and the images
// of each side, as paths below the data folder, sorted.
type SplitList struct {
	datalayout.ValSplit
	Data  string   `json:"data"`
	Train []string `json:"train"`
	Val   []string `json:"val"`
}

// splitList lists the images of the opened training and validation data
// of a held-out split; ok is false where the run has none.
func splitList(cfg *Config, train, val *data.Dataset) (l SplitList, ok bool) {
	vs := cfg.Train.ValSplit
	if vs == nil || train == nil || val == nil {
		return l, false
	}
	root := cfg.Train.Data
	if root == "" {
		root = cfg.Train.Images
	}
	l = SplitList{ValSplit: *vs, Data: root, Train: imagesBelow(root, train), Val: imagesBelow(root, val)}
	return l, true
}

func imagesBelow(root string, ds *data.Dataset) []string {
	out := make([]string, 0, ds.Len())
	for i := range ds.Len() {
		e, _ := ds.Example(i)
		rel, err := filepath.Rel(root, e.Image)
		if err != nil {
			rel = e.Image
		}
		out = append(out, filepath.ToSlash(rel))
	}
	slices.Sort(out)
	return out
}

// writeSplitList writes SplitFile for a new run, or, resuming, says in
// one line where the data changed since: the split follows the images, so
// images added or removed move others between the sides.
func (t *runner) writeSplitList(resuming bool) error {
	l, ok := splitList(&t.cfg, t.train, t.val)
	if !ok {
		return nil
	}
	path := filepath.Join(t.dir, SplitFile)
	if resuming {
		var old SplitList
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // an interrupted start; the next one writes it
		}
		if err == nil {
			err = json.Unmarshal(b, &old)
		}
		if err != nil {
			return fmt.Errorf("finetune: %s: %w", path, err)
		}
		if !slices.Equal(old.Train, l.Train) || !slices.Equal(old.Val, l.Val) {
			fmt.Fprintf(t.hooks.Log, "warning: the data in %s changed since the run started: the validation split now has %d training and %d validation images (%s lists %d and %d)\n",
				l.Data, len(l.Train), len(l.Val), path, len(old.Train), len(old.Val))
		}
		return nil
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o644)
}
