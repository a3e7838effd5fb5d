package finetune

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/segtune/segtune/internal/setting"
)

// A run's paths (its base model and data) are read as on the command
// line, against the working directory, and recorded absolute (absPaths):
// its config.json and checkpoints then repeat and resume the run from any
// folder. A relative path in a configuration (a hand-written config.json,
// one of an older segtune) is read against the working directory too,
// and one that does not exist is refused naming its key (CheckPaths)
// rather than read elsewhere.

// pathField is one of a configuration's paths, by its config.json key.
type pathField struct {
	Key  string
	Path *string
}

// paths lists c's paths.
func (c *Config) paths() []pathField {
	return []pathField{
		{"network.base_model", &c.Network.BaseModel},
		{"train.images", &c.Train.Images}, {"train.masks", &c.Train.Masks}, {"train.data", &c.Train.Data},
		{"val.images", &c.Val.Images}, {"val.masks", &c.Val.Masks}, {"val.data", &c.Val.Data},
	}
}

// CheckPaths returns a *setting.Error, of the path's config.json key, for
// the first path of c that names nothing (an empty one is not given).
func (c *Config) CheckPaths() error {
	for _, f := range c.paths() {
		if *f.Path == "" {
			continue
		}
		if _, err := os.Stat(*f.Path); err != nil {
			wd, _ := os.Getwd()
			if pe, ok := err.(*os.PathError); ok {
				err = pe.Err // the path is in the message already
			}
			if !filepath.IsAbs(*f.Path) {
				err = fmt.Errorf("%w (a relative path is read against the working directory, %s)", err, wd)
			}
			return &setting.Error{Setting: f.Key, Value: strconv.Quote(*f.Path), Err: err}
		}
	}
	return nil
}

// absPaths makes c's paths absolute, against the working directory.
func (c *Config) absPaths() error {
	for _, f := range c.paths() {
		if *f.Path == "" || filepath.IsAbs(*f.Path) {
			continue
		}
		abs, err := filepath.Abs(*f.Path)
		if err != nil {
			return fmt.Errorf("%s %q: %w", f.Key, *f.Path, err)
		}
		*f.Path = abs
	}
	return nil
}

// RunOutputs names the outputs a run's folder dir holds: a run without
// validation has no best.ckpt, and a summary names only what is there.
func RunOutputs(dir string) []string {
	var out []string
	for _, f := range []string{"model.onnx", "model.segtune.json", "best.ckpt", "last.ckpt", "metrics.jsonl", "curves.png", SplitFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			out = append(out, f)
		}
	}
	return out
}
