package finetune

import (
	"path/filepath"

	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/internal/setting"
)

// RunDirOverlapError is a run folder that is a folder the run reads (the
// base model's, and so its sidecar's and external data's, or a data
// folder), or that lies inside a data folder.
type RunDirOverlapError struct {
	Dir string // the run folder, as given
	// What describes the folder it overlaps, with its path ("the training
	// images folder /data/img").
	What   string
	Inside bool // Dir lies inside the data folder What names
}

func (e *RunDirOverlapError) Error() string { return e.Named(setting.Key) }

// Named is the message with its settings called name(key).
func (e *RunDirOverlapError) Named(name func(key string) string) string {
	if e.Inside {
		return setting.Sprintf(name, "finetune: {run_dir} %s is inside %s: the run's images (curves.png, samples.png) would mix with the data; choose a folder outside it", e.Dir, e.What)
	}
	return setting.Sprintf(name, "finetune: {run_dir} %s is %s: the run writes %s, %s, %s, %s and checkpoints there; choose another folder",
		e.Dir, e.What, ModelFile, ConfigFile, HistoryFile, PlotFile)
}

// CheckRunDir refuses the run folder dir of cfg's run when it is the base
// model's folder or a data folder, or lies inside a data folder (which
// the layouts that walk nested folders would read as data): the run
// writes model.onnx, config.json, metrics.jsonl, curves.png and
// checkpoints there. Folders are compared resolved; the base model's
// folder is taken both as named (where its sidecar is looked for) and with
// links resolved.
func CheckRunDir(dir string, cfg Config) error {
	ro, err := pathguard.Resolve(dir)
	if err != nil {
		return err
	}
	for _, d := range []string{cfg.Train.Data, cfg.Val.Data} {
		if d == "" {
			continue
		}
		r, err := pathguard.Resolve(d)
		if err != nil {
			return err
		}
		if pathguard.Within(ro, r) {
			return &RunDirOverlapError{Dir: dir, What: "the data folder " + d, Inside: true}
		}
	}
	for _, g := range readFolders(cfg) {
		r, err := pathguard.Resolve(g.dir)
		if err != nil {
			return err
		}
		if r == ro {
			return &RunDirOverlapError{Dir: dir, What: g.what}
		}
	}
	return nil
}

type namedFolder struct{ dir, what string }

// readFolders are the folders a run reads files from, described.
func readFolders(cfg Config) []namedFolder {
	var folders []namedFolder
	if b := cfg.Network.BaseModel; b != "" {
		what := "the folder of the base model " + b
		folders = append(folders, namedFolder{filepath.Dir(b), what})
		if r, err := filepath.EvalSymlinks(b); err == nil {
			folders = append(folders, namedFolder{filepath.Dir(r), what})
		}
	}
	for _, d := range []namedFolder{{cfg.Train.Images, "the training images folder"}, {cfg.Train.Masks, "the training masks folder"},
		{cfg.Val.Images, "the validation images folder"}, {cfg.Val.Masks, "the validation masks folder"}} {
		if d.dir != "" {
			folders = append(folders, namedFolder{d.dir, d.what + " " + d.dir})
		}
	}
	return folders
}
