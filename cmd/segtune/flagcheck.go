package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy/trainingraph"
	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/regsettings"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
)

// flagRanges are the valid values of segtune's numeric flags that no
// library check covers as a flag Action, by flag name, each its owning
// library's range; commandRanges override them where one name means
// different things in different commands (keyed "command flag").
func flagRanges() map[string]setting.Range {
	return map[string]setting.Range{
		"batch":          inference.BatchRange,
		"epochs":         finetune.Ranges["epochs"],
		"ignore":         imageio.LabelRange,
		"classes":        finetune.ClassesRange,
		"alpha":          dual.AlphaRange,
		"size-threshold": metrics.SizeThresholdRange,
		"width":          models.WidthRange,
		"output-stride":  models.OutputStrideRange,
		"train":          synth.TrainRange,
		"val":            synth.ValRange,
		"grid":           regsettings.SharesRange,
		"size-bins":      regsettings.SharesRange,
	}
}

var commandRanges = map[string]setting.Range{
	"new classes":      models.ClassesRange,
	"check classes":    data.NumClassesRange,
	"finetune ignore":  finetune.IgnoreRange,
	"artifacts ignore": trainingraph.IgnoreRange,
	"split val":        datalayout.SplitShareRange,
}

// checkNumericFlags sets the memory limit (--max-memory) and validates
// every numeric flag the command defines, defaults included, before the
// command does any work (cliflag.CheckRanges).
func checkNumericFlags(c *cli.Context) error {
	if err := memlimit.Configure(globals(c).MaxMemory); err != nil {
		return cli.Exit("--max-memory: "+err.Error(), 2)
	}
	ranges := flagRanges()
	err := cliflag.CheckRanges(c, func(name string) (setting.Range, bool) {
		if r, ok := commandRanges[c.Command.Name+" "+name]; ok {
			return r, true
		}
		r, ok := ranges[name]
		return r, ok
	})
	if err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	return nil
}
