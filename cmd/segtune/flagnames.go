package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/setting"
)

// The libraries name a setting they refuse by its key (*setting.Error),
// as config files and a run's config.json do; the user set it with a flag.
// This is the one place that maps a key to its flag: keyFlags are the keys whose flag is not the key with - for _ and .,
// and ("command key") those whose flag is another in one command.
var keyFlags = map[string]string{
	"max_steps":          "steps",
	"run_dir":            "out",
	"cuda_options":       "cuda-opt",
	"scale_factor":       "scale",              // a preprocessing's resize factor
	"val_dense":          "val-tile/--val-tta", // finetune's tiling and TTA of validation
	"network.base_model": "model",              // finetune's paths, by their config.json keys
	"train.data":         "data",
	"val.data":           "data",
	"split val_split":    "val", // data split's fraction
}

// flagOf is the flag that sets the setting key.
func flagOf(key string) string { return flagIn("")(key) }

// flagIn is flagOf in the command cmd.
func flagIn(cmd string) func(key string) string {
	return func(key string) string {
		for _, k := range []string{cmd + " " + key, key} {
			if flag, ok := keyFlags[k]; ok {
				return "--" + flag
			}
		}
		return "--" + strings.NewReplacer("_", "-", ".", "-").Replace(key)
	}
}

// withFlagNames is err with the settings it names called by their flags.
func withFlagNames(err error) error { return setting.Rename(err, flagOf) }

// nameFlags makes the actions of cmds (and their subcommands) report
// library errors by the command's flags.
func nameFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		nameFlags(cmd.Subcommands)
		if action := cmd.Action; action != nil {
			cmd.Action = func(c *cli.Context) error { return setting.Rename(action(c), flagIn(cmd.Name)) }
		}
	}
}

// givenKeys are those of keys whose flag is among the flags given.
func givenKeys(given, keys []string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return !slices.Contains(given, flagOf(k)[2:]) })
}
