package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy/trainingraph"
	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
)

// flagRanges are the valid values of segtune's numeric flags, by flag
// name; commandRanges override them where one name means different things
// in different commands (keyed "command flag").
func flagRanges() map[string]setting.Range {
	return map[string]setting.Range{
		"batch":          {Min: 1, Max: 1 << 16},
		"epochs":         {Min: 0, Max: 1 << 24},
		"ignore":         {Min: 0, Max: 65535, Why: "mask labels are 0..65535"},
		"classes":        {Min: 1, Max: 65536, Zero: true, Why: "0 keeps the model's classifier"},
		"alpha":          dual.AlphaRange,
		"size-threshold": {Min: 0, Max: 1, Why: "a fraction of the image"},
		"width":          {Min: 0, MinOpen: true, Max: 16},
		"output-stride":  {Min: 8, Max: 16},
		"train":          {Min: 1, Max: 1 << 20},
		"val":            {Min: 0, Max: 1 << 20},
		"grid":           {Min: 0, Max: 1, List: true},
		"size-bins":      {Min: 0, Max: 1, List: true},
	}
}

var commandRanges = map[string]setting.Range{
	"new classes":      {Min: 2, Max: 65536},
	"artifacts ignore": trainingraph.IgnoreRange,

	"split val": {Min: 0, MinOpen: true, Max: 1, Zero: true, Why: "the share of the images held out"},
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
