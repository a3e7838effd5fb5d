package checkpoint

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/regfile"
)

// Save writes c to path atomically: it validates c (refusing non-finite
// weights), writes a temporary file in path's folder, syncs it, renames it
// over path and syncs the folder. If anything fails, or the process dies
// at any point, path still holds its previous contents. The file is then
// read back and its checksum compared with the one written, so a
// checkpoint that does not read back intact is an error.
func Save(path string, c *Checkpoint) error {
	return save(path, c, nil)
}

// save is Save with a hook that wraps the file writer, so tests can
// simulate a write failing (or corrupting data) partway.
func save(path string, c *Checkpoint, wrap func(io.Writer) io.Writer) (err error) {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("checkpoint %s: not saved: %w", path, err)
	}
	var sum uint32
	if err := atomicfile.WriteWrapped(path, 0o644, wrap, func(w io.Writer) error {
		var err error
		sum, err = write(w, c)
		return err
	}); err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if err := Verify(path, sum); err != nil {
		return fmt.Errorf("checkpoint %s: written, but it does not read back intact: %w", path, err)
	}
	return nil
}

// Verify reads the checkpoint at path and checks its end marker and its
// CRC-32C over every byte, and, when want is non-zero, that the CRC is the
// one the writer computed. It reads the file once, without decoding it.
func Verify(path string, want uint32) error {
	f, size, err := open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if size < headerSize+footerSize {
		return fmt.Errorf("%w: %d bytes", ErrTruncated, size)
	}
	crc := crc32.New(castagnoli)
	if n, err := io.Copy(crc, io.NewSectionReader(f, 0, size-footerSize)); err != nil || n != size-footerSize {
		return fmt.Errorf("%w: read %d of %d bytes: %v", ErrTruncated, n, size-footerSize, err)
	}
	var ftr [footerSize]byte
	if _, err := f.ReadAt(ftr[:], size-footerSize); err != nil {
		return fmt.Errorf("footer: %w", eofIsTruncation(err))
	}
	if string(ftr[4:]) != endMagic {
		return fmt.Errorf("%w: bad end marker %q", ErrCorrupt, ftr[4:])
	}
	got, stored := crc.Sum32(), binary.LittleEndian.Uint32(ftr[:])
	if got != stored {
		return fmt.Errorf("%w: CRC-32C is %08x, footer says %08x", ErrCorrupt, got, stored)
	}
	if want != 0 && stored != want {
		return fmt.Errorf("%w: CRC-32C is %08x, the writer computed %08x", ErrCorrupt, stored, want)
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
//
// Only checkpoints that read back intact count: each is verified after it
// is written, and a best.ckpt found in the folder ranks only if it passes
// the full check and was written by the same run (RunID). One that does not
// is moved aside (renamed best.ckpt.corrupt-TIME or best.ckpt.foreign-TIME,
// never deleted) with a warning on Log.
type Keeper struct {
	// Dir is the folder; Save creates it if needed.
	Dir string
	// Metric names the entry of Checkpoint.Metrics that ranks
	// checkpoints, such as "val_miou"; empty keeps no best.ckpt.
	Metric string
	// LowerIsBetter ranks by the smallest value (for losses) instead of
	// the largest.
	LowerIsBetter bool
	// RunID is stamped on checkpoints that have none, and a best.ckpt
	// must carry it to rank.
	RunID string
	// Log receives warnings; nil discards them.
	Log io.Writer

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
	if c.RunID == "" {
		c.RunID = k.RunID
	}
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
		if bv, ok := k.readBest(); ok {
			k.best, k.bestSet = bv, true
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

// readBest returns the metric of the best.ckpt in the folder, if it is
// intact and this run's; a corrupt or foreign one is moved aside.
func (k *Keeper) readBest() (float64, bool) {
	path := k.BestPath()
	if _, err := os.Lstat(path); err != nil {
		return 0, false
	}
	in, err := k.checkOwn(path)
	if err != nil {
		k.setAside(path, err)
		return 0, false
	}
	v, ok := in.Metrics[k.Metric]
	return v, ok
}

// checkOwn verifies the checkpoint at path completely (CRC included) and
// that this run wrote it.
func (k *Keeper) checkOwn(path string) (*Info, error) {
	if err := Verify(path, 0); err != nil {
		return nil, err
	}
	in, err := ReadInfo(path)
	if err != nil {
		return nil, err
	}
	if in.RunID != k.RunID {
		return nil, &ForeignError{Path: path, RunID: in.RunID, Want: k.RunID}
	}
	return in, nil
}

// ForeignError reports a checkpoint written by another run.
type ForeignError struct{ Path, RunID, Want string }

func (e *ForeignError) Error() string {
	return fmt.Sprintf("%s was written by another run (run id %q, this run is %q)", e.Path, e.RunID, e.Want)
}

// setAside renames a checkpoint that must not be used out of the way,
// keeping it for the user, and says so.
func (k *Keeper) setAside(path string, why error) {
	kind := "corrupt"
	var fe *ForeignError
	if errors.As(why, &fe) {
		kind = "foreign"
	}
	dst := fmt.Sprintf("%s.%s-%s", path, kind, time.Now().UTC().Format("20060102T150405.000"))
	if err := os.Rename(path, dst); err != nil {
		k.warnf("warning: %s is not usable (%v), and moving it aside failed: %v\n", path, why, err)
		return
	}
	k.warnf("warning: %s is not usable (%v); moved it to %s\n", path, why, filepath.Base(dst))
}

func (k *Keeper) warnf(format string, args ...any) {
	if k.Log != nil {
		fmt.Fprintf(k.Log, format, args...)
	}
}

// ExportPath returns the checkpoint a finished run should export:
// best.ckpt when it is intact and this run's, else last.ckpt (with a
// warning when best.ckpt exists but is unusable). ok is false when
// neither is usable.
func (k *Keeper) ExportPath() (path string, ok bool) {
	best := k.BestPath()
	if _, err := os.Lstat(best); err == nil {
		if _, err := k.checkOwn(best); err == nil {
			return best, true
		} else {
			k.setAside(best, err)
		}
	}
	last := k.LastPath()
	if _, err := os.Lstat(last); err != nil {
		return "", false
	}
	if _, err := k.checkOwn(last); err != nil {
		k.warnf("warning: %s is not usable either: %v\n", last, err)
		return "", false
	}
	return last, true
}

// linkBest points best.ckpt at last.ckpt's contents atomically: link to a
// temporary name, then rename over best.ckpt. last.ckpt is later replaced
// by a rename, which leaves best.ckpt's inode untouched.
func (k *Keeper) linkBest(last string, c *Checkpoint) error {
	best := k.BestPath()
	tmp := filepath.Join(k.Dir, tempPrefix(BestName)+"link")
	os.Remove(tmp)
	if err := os.Link(last, tmp); err != nil {
		return Save(best, c) // verified like last.ckpt
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
