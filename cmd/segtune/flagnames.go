package main

import (
	"slices"
	"strings"

	"github.com/segtune/segtune/internal/setting"
)

// The libraries name a setting they refuse by its key (*setting.Error),
// as config files and a run's config.json do; the user set it with a flag.
// This is the one place that maps a key to its flag.

// keyFlags are the keys whose flag is not the key with - for _.
var keyFlags = map[string]string{
	"max_steps":    "steps",
	"run_dir":      "out",
	"cuda_options": "cuda-opt",
	"val_dense":    "val-tile/--val-tta", // finetune's tiling and TTA of validation
	// finetune's paths, by their config.json keys
	"network.base_model": "model",
	"train.data":         "data",
	"train.images":       "train-images",
	"train.masks":        "train-masks",
	"val.images":         "val-images",
	"val.masks":          "val-masks",
	"val.data":           "data",
}

// flagOf is the flag that sets the setting key.
func flagOf(key string) string {
	if flag, ok := keyFlags[key]; ok {
		return "--" + flag
	}
	return "--" + strings.ReplaceAll(key, "_", "-")
}

// withFlagNames is err with the settings it names called by their flags.
func withFlagNames(err error) error { return setting.Rename(err, flagOf) }

// givenKeys are those of keys whose flag is among the flags given.
func givenKeys(given, keys []string) []string {
	return slices.DeleteFunc(keys, func(k string) bool { return !slices.Contains(given, flagOf(k)[2:]) })
}
