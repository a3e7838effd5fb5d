package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/cliflag"
)

// configCommands take --config FILE.
var configCommands = map[string]bool{"finetune": true, "segment": true, "eval": true, "export": true, "serve": true}

// configFlag is command's --config into path; its example names only
// flags the command has.
func configFlag(command string, path *string) cli.Flag {
	example, replay := "`mean: [0.485, 0.456, 0.406]`", ""
	if command == "finetune" {
		example = "`lr: 3e-4` or " + example
		replay = " An earlier run's config.json repeats that run (flags given change it; a run records its paths absolute)."
	}
	return &cli.StringFlag{Name: "config", Usage: "read flag values from `FILE`: YAML or JSON, flag names to values " +
		"(e.g. " + example + "); flags on the command line win; paths are read as on the " +
		"command line, against the working directory." + replay, Destination: path}
}

// installConfigFiles gives the commands of configCommands a --config flag
// whose file sets the flags the command line leaves unset, before any
// other check reads them (cliflag.InstallConfigFiles).
func installConfigFiles(cmds []*cli.Command) {
	cliflag.InstallConfigFiles(cmds, func(name string) bool { return configCommands[name] }, configFlag, applyConfigFile)
}

// applyConfigFile sets each flag that --config's file names and the
// command line does not (cliflag.ApplyConfigFile). A run's config.json
// given to finetune is left to recordedRun.
func applyConfigFile(c *cli.Context, path string) error {
	settings, b, err := cliflag.ReadConfigFile(path)
	if settings == nil || err != nil {
		return err
	}
	if c.Command.Name == "finetune" && finetune.IsRecordedRun(settings) {
		_, err := parseRecordedRun(path, b)
		return err
	}
	return cliflag.ApplyConfigFile(c, path, settings, configPathFlags)
}

// configPathFlags are the flags that name files or folders a command
// reads, checked when a --config file sets them (the rule finetune's
// config.json follows too, whose paths a run records absolute).
var configPathFlags = []string{"model", "data", "images", "masks", "input", "train-images", "train-masks",
	"val-images", "val-masks", "calibrate", "check-images", "palette"}

// parseRecordedRun reads a run's config.json (finetune.ParseRecordedRun).
func parseRecordedRun(path string, b []byte) (*finetune.Config, error) {
	cfg, err := finetune.ParseRecordedRun(b)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--config %s: %v", path, err), 2)
	}
	return cfg, nil
}

// recordedRun is the run that --config's config.json at path records, or
// nil (runsetup.Request.Recorded).
func recordedRun(path string) (*finetune.Config, error) {
	settings, b, err := cliflag.ReadConfigFile(path)
	if err != nil || !finetune.IsRecordedRun(settings) {
		return nil, err
	}
	return parseRecordedRun(path, b)
}
