package synth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
)

// Files Generate writes in the data set folder besides images/ and masks/.
const (
	// ManifestFile records the configuration and every object; it is
	// written last, so its presence means the set is complete.
	ManifestFile = "synth.json"
	// ClassesFile lists the class names, one per line, in label order.
	ClassesFile = "classes.txt"
)

// ManifestVersion is the manifest format version Generate writes.
const ManifestVersion = 1

// Manifest describes a generated data set.
type Manifest struct {
	Version int             `json:"version"`
	Config  Config          `json:"config"`
	Classes []string        `json:"classes"`
	Palette imageio.Palette `json:"palette"`
	Images  []ImageInfo     `json:"images"`
}

// ImageInfo is one image of a manifest: its split, file name stem (the
// image is images/SPLIT/NAME.png, the mask masks/SPLIT/NAME.png) and
// objects.
type ImageInfo struct {
	Split   string   `json:"split"`
	Name    string   `json:"name"`
	Objects []Object `json:"objects"`
}

// Fractions returns the visible area of every object that kept at least
// one pixel, as a fraction of its image.
func (m *Manifest) Fractions() []float64 {
	area := float64(m.Config.Height * m.Config.Width)
	var out []float64
	for _, im := range m.Images {
		for _, o := range im.Objects {
			if o.Pixels > 0 {
				out = append(out, float64(o.Pixels)/area)
			}
		}
	}
	return out
}

// Generate writes the data set c describes into dir:
//
//	dir/images/train/train_00000.png ...   RGB images
//	dir/masks/train/train_00000.png ...    palette PNG masks (index = class)
//	dir/images/val/val_00000.png ...
//	dir/masks/val/val_00000.png ...
//	dir/classes.txt                        background, disc, square
//	dir/synth.json                         the Manifest
//
// the canonical layout datalayout finds. Images are rendered and
// encoded on all CPUs. dir must be absent or empty, or hold a complete set
// generated from the same configuration, in which case Generate writes
// nothing and returns its manifest (a cache). Files are not synced to
// disk: an interrupted run leaves no manifest, and the folder must then be
// removed before trying again.
func Generate(dir string, c Config) (*Manifest, error) {
	c, err := c.Normalized()
	if err != nil {
		return nil, err
	}
	if done, err := existing(dir, c); done != nil || err != nil {
		return done, err
	}
	for _, s := range Splits {
		for _, kind := range []string{"images", "masks"} {
			if err := os.MkdirAll(filepath.Join(dir, kind, s), 0o755); err != nil {
				return nil, fmt.Errorf("synth: %w", err)
			}
		}
	}
	type job struct {
		split string
		index int
		slot  int
	}
	var jobs []job
	for _, s := range Splits {
		n := c.Train
		if s == "val" {
			n = c.Val
		}
		for i := 0; i < n; i++ {
			jobs = append(jobs, job{s, i, len(jobs)})
		}
	}
	infos := make([]ImageInfo, len(jobs))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ch := make(chan job)
	var wg sync.WaitGroup
	// Four workers per CPU, so that file creations blocked in the
	// kernel overlap with rendering and encoding.
	for w := 0; w < min(4*runtime.GOMAXPROCS(0), len(jobs)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for j := range ch {
				info, err := writeOne(dir, c, j.split, j.index, &buf)
				if err != nil {
					cancel(err)
					continue
				}
				infos[j.slot] = info
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case ch <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(ch)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	m := &Manifest{Version: ManifestVersion, Config: c, Classes: ClassNames, Palette: Palette, Images: infos}
	if err := atomicfile.Write(filepath.Join(dir, ClassesFile), []byte(strings.Join(ClassNames, "\n")+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	js, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(dir, ManifestFile), append(js, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	return m, nil
}

// writeOne renders one example and writes its image and mask.
func writeOne(dir string, c Config, split string, index int, buf *bytes.Buffer) (ImageInfo, error) {
	ex, err := Render(c, split, index)
	if err != nil {
		return ImageInfo{}, err
	}
	name := ex.Name + ".png"
	buf.Reset()
	if err := imageio.EncodePNG(buf, ex.Image); err != nil {
		return ImageInfo{}, fmt.Errorf("synth: encoding %s: %w", name, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, "images", split, name), buf.Bytes(), 0o644); err != nil {
		return ImageInfo{}, fmt.Errorf("synth: %w", err)
	}
	mask, err := imageio.MaskImage(ex.Labels, c.Width, c.Height, Palette)
	if err != nil {
		return ImageInfo{}, fmt.Errorf("synth: mask %s: %w", name, err)
	}
	buf.Reset()
	if err := imageio.EncodePNG(buf, mask); err != nil {
		return ImageInfo{}, fmt.Errorf("synth: encoding mask %s: %w", name, err)
	}
	if err := atomicfile.Write(filepath.Join(dir, "masks", split, name), buf.Bytes(), 0o644); err != nil {
		return ImageInfo{}, fmt.Errorf("synth: %w", err)
	}
	return ImageInfo{Split: split, Name: ex.Name, Objects: ex.Objects}, nil
}

// existing returns the manifest of a complete set in dir generated from c,
// nil when dir is absent or empty, and an error when dir holds anything
// else.
func existing(dir string, c Config) (*Manifest, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(entries) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	m, err := Load(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("synth: %s is neither empty nor a generated data set (no %s); remove it or pick another folder", dir, ManifestFile)
		}
		return nil, err
	}
	if m.Config != c {
		return nil, fmt.Errorf("synth: %s holds a data set generated with %+v, not %+v; remove it or pick another folder", dir, m.Config, c)
	}
	for _, im := range m.Images {
		for _, kind := range []string{"images", "masks"} {
			if _, err := os.Stat(filepath.Join(dir, kind, im.Split, im.Name+".png")); err != nil {
				return nil, fmt.Errorf("synth: %s is incomplete: %w; remove it and generate again", dir, err)
			}
		}
	}
	return m, nil
}

// Load reads the manifest of a data set generated in dir.
func Load(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("synth: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("synth: %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("synth: %s: manifest version %d, want %d", filepath.Join(dir, ManifestFile), m.Version, ManifestVersion)
	}
	return &m, nil
}
