package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
)

// Save writes c to path atomically: it validates c (refusing non-finite
// weights), writes a temporary file in path's folder, syncs it, renames it
// over path and syncs the folder. If anything fails, or the process dies
// at any point, path still holds its previous contents.
func Save(path string, c *Checkpoint) error {
	return save(path, c, nil)
}

// save is Save with a hook that wraps the file writer, so tests can
// simulate a write failing partway.
func save(path string, c *Checkpoint, wrap func(io.Writer) io.Writer) (err error) {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("checkpoint %s: not saved: %w", path, err)
	}
	if err := atomicfile.WriteWrapped(path, 0o644, wrap, func(w io.Writer) error { return Write(w, c) }); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return nil
}

// tempPrefix names the temporary files Save creates for a destination
// called base; they are hidden, and Keeper removes stale ones.
func tempPrefix(base string) string { return atomicfile.TempPrefix(base) }

func syncDir(dir, path string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint %s: syncing folder: %w", path, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("checkpoint %s: syncing folder: %w", path, err)
	}
	return nil
}

// Load reads and verifies the checkpoint at path. Errors name the file and
// wrap ErrTruncated, ErrBadMagic, ErrVersion, ErrCorrupt or ErrNonFinite
// where they apply.
func Load(path string) (*Checkpoint, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := Read(bufio.NewReaderSize(f, 1<<20), size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return c, nil
}

// ReadInfo reads only the header and metadata of the checkpoint at path,
// checking them and the file size but not the CRC of the data. It is cheap
// whatever the model size.
func ReadInfo(path string) (*Info, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, _, err := readMeta(bufio.NewReader(f), size)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return infoFrom(m, size), nil
}

func open(path string) (*os.File, int64, error) {
	f, st, err := regfile.Open(path)
	if err != nil {
		if errors.Is(err, regfile.ErrNotRegular) {
			return nil, 0, fmt.Errorf("checkpoint %s: %w", path, err)
		}
		return nil, 0, fmt.Errorf("checkpoint: %w", err)
	}
	return f, st.Size(), nil
}

// File names Keeper uses in its folder.
const (
	LastName = "last.ckpt"
	BestName = "best.ckpt"
)

// Keeper maintains a run's checkpoint folder: last.ckpt, the latest
// checkpoint, and, if Metric is set, best.ckpt, the checkpoint with the best
// value of that metric so far. A Keeper is meant for one writer per folder.
type Keeper struct {
	// Dir is the folder; Save creates it if needed.
	Dir string
	// Metric names the entry of Checkpoint.Metrics that ranks
	// checkpoints, such as "val_miou"; empty keeps no best.ckpt.
	Metric string
	// LowerIsBetter ranks by the smallest value (for losses) instead of
	// the largest.
	LowerIsBetter bool

	best    float64
	bestSet bool // best holds best.ckpt's metric (read lazily)
}

// LastPath returns the path of last.ckpt.
func (k *Keeper) LastPath() string { return filepath.Join(k.Dir, LastName) }

// BestPath returns the path of best.ckpt.
func (k *Keeper) BestPath() string { return filepath.Join(k.Dir, BestName) }

// Save writes c as last.ckpt and, if it improves on best.ckpt's metric (or
// there is no best.ckpt yet), makes best.ckpt a hard link to the same
// contents (a copy where links are unsupported). It reports whether c
// became the best. Stale temporary files of earlier interrupted saves are
// removed first. A checkpoint without the metric never becomes the best.
func (k *Keeper) Save(c *Checkpoint) (best bool, err error) {
	if err := os.MkdirAll(k.Dir, 0o755); err != nil {
		return false, fmt.Errorf("checkpoint: %w", err)
	}
	k.removeStale()
	last := k.LastPath()
	if err := Save(last, c); err != nil {
		return false, err
	}
	if k.Metric == "" {
		return false, nil
	}
	v, ok := c.Metrics[k.Metric]
	if !ok || math.IsNaN(v) {
		return false, nil
	}
	if !k.bestSet {
		// A missing or unreadable best.ckpt is simply replaced.
		if in, err := ReadInfo(k.BestPath()); err == nil {
			if bv, ok := in.Metrics[k.Metric]; ok {
				k.best, k.bestSet = bv, true
			}
		}
	}
	if k.bestSet && !(k.LowerIsBetter && v < k.best || !k.LowerIsBetter && v > k.best) {
		return false, nil
	}
	if err := k.linkBest(last, c); err != nil {
		return false, err
	}
	k.best, k.bestSet = v, true
	return true, nil
}

// linkBest points best.ckpt at last.ckpt's contents atomically: link to a
// temporary name, then rename over best.ckpt. last.ckpt is later replaced
// by a rename, which leaves best.ckpt's inode untouched.
func (k *Keeper) linkBest(last string, c *Checkpoint) error {
	best := k.BestPath()
	tmp := filepath.Join(k.Dir, tempPrefix(BestName)+"link")
	os.Remove(tmp)
	if err := os.Link(last, tmp); err != nil {
		return Save(best, c)
	}
	if err := os.Rename(tmp, best); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint %s: %w", best, err)
	}
	return syncDir(k.Dir, best)
}

// removeStale deletes temporary files left in Dir by saves that were
// interrupted (each may be as large as a checkpoint).
func (k *Keeper) removeStale() {
	entries, err := os.ReadDir(k.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if e.Type()&fs.ModeType == 0 &&
			(strings.HasPrefix(name, tempPrefix(LastName)) || strings.HasPrefix(name, tempPrefix(BestName))) {
			os.Remove(filepath.Join(k.Dir, name))
		}
	}
}

// LoadLast loads last.ckpt.
func (k *Keeper) LoadLast() (*Checkpoint, error) { return Load(k.LastPath()) }

// LoadBest loads best.ckpt.
func (k *Keeper) LoadBest() (*Checkpoint, error) { return Load(k.BestPath()) }
