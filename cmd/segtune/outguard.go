package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/pathguard"
)

// guardFinetuneOut refuses a finetune --out folder that holds the base
// model (and so its sidecar and external data), is one of the data
// folders or lies inside a --data folder: the run writes model.onnx, config.json, metrics.jsonl,
// curves.png and checkpoints there. Folders are compared resolved; the
// base model's folder is taken both as named (where its sidecar is looked
// for) and with links resolved.
func guardFinetuneOut(out string, cfg finetune.Config) error {
	ro, err := pathguard.Resolve(out)
	if err != nil {
		return err
	}
	type guarded struct{ dir, what string }
	var folders []guarded
	if b := cfg.Network.BaseModel; b != "" {
		what := "the folder of the base model " + b
		folders = append(folders, guarded{filepath.Dir(b), what})
		if r, err := filepath.EvalSymlinks(b); err == nil {
			folders = append(folders, guarded{filepath.Dir(r), what})
		}
	}
	for _, d := range []guarded{{cfg.Train.Images, "the training images folder"}, {cfg.Train.Masks, "the training masks folder"},
		{cfg.Val.Images, "the validation images folder"}, {cfg.Val.Masks, "the validation masks folder"}} {
		if d.dir != "" {
			folders = append(folders, guarded{d.dir, d.what + " " + d.dir})
		}
	}
	// A run folder inside a data folder would be read as data by the
	// layouts that walk nested folders.
	for _, d := range []string{cfg.Train.Data, cfg.Val.Data} {
		if d == "" {
			continue
		}
		r, err := pathguard.Resolve(d)
		if err != nil {
			return err
		}
		if pathguard.Within(ro, r) {
			return cli.Exit(fmt.Sprintf("finetune: --out %s is inside the data folder %s: the run's images (curves.png, samples.png) would mix with the data; choose a folder outside it", out, d), 2)
		}
	}
	for _, g := range folders {
		r, err := pathguard.Resolve(g.dir)
		if err != nil {
			return err
		}
		if r == ro {
			return cli.Exit(fmt.Sprintf("finetune: --out %s is %s: the run writes %s, %s, %s, %s and checkpoints there; choose another folder",
				out, g.what, finetune.ModelFile, finetune.ConfigFile, finetune.HistoryFile, finetune.PlotFile), 2)
		}
	}
	return nil
}
