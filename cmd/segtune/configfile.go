package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/cliflag"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/storage"
)

// configCommands take --config FILE.
var configCommands = map[string]bool{"finetune": true, "segment": true, "eval": true, "export": true, "serve": true}

// maxConfigBytes bounds a --config file: flag values, not data.
const maxConfigBytes = 1 << 20

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
// other check reads them (install it last: it then runs first). Their
// required flags may come from the file, so they are checked after it.
func installConfigFiles(cmds []*cli.Command) {
	for _, cmd := range cmds {
		if !configCommands[cmd.Name] {
			continue
		}
		path := configPath(cmd)
		required := cliflag.Unrequire(cmd.Flags)
		cliflag.Before(cmd, func(c *cli.Context) error {
			if err := applyConfigFile(c, *path); err != nil {
				return err
			}
			return cliflag.Require(c, required...) // the parser's check, after the file
		})
	}
}

// configPath is where cmd's --config goes: its own flag's value (finetune
// reads it again for a recorded run), else a flag added here.
func configPath(cmd *cli.Command) *string {
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "config" {
			return sf.Destination
		}
	}
	path := new(string)
	cmd.Flags = append(cmd.Flags, configFlag(cmd.Name, path))
	return path
}

// readConfigFile reads --config's file at path into flag names and values;
// nil without --config.
func readConfigFile(path string) (map[string]any, []byte, error) {
	if path == "" {
		return nil, nil, nil
	}
	b, err := regfile.ReadSmall(path, maxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--config: %w", err)
	}
	settings, err := cliflag.ParseFile(path, b)
	if err != nil {
		return nil, nil, fmt.Errorf("--config %w", err)
	}
	return settings, b, nil
}

// applyConfigFile sets each flag that --config's file names and the
// command line does not (cliflag.Apply). A run's config.json given to
// finetune is left to recordedRun.
func applyConfigFile(c *cli.Context, path string) error {
	settings, b, err := readConfigFile(path)
	if settings == nil || err != nil {
		return err
	}
	if c.Command.Name == "finetune" && finetune.IsRecordedRun(settings) {
		_, err := parseRecordedRun(path, b)
		return err
	}
	unset := map[string]bool{}
	for _, name := range configPathFlags {
		unset[name] = !c.IsSet(name)
	}
	if err := cliflag.Apply(c, settings, "config"); err != nil {
		return cli.Exit(fmt.Sprintf("--config %s: %v", path, err), 2)
	}
	for _, name := range configPathFlags {
		if v := c.String(name); unset[name] && c.IsSet(name) && isLocalPath(name, v) {
			if _, err := os.Stat(v); err != nil {
				return cli.Exit(fmt.Sprintf("--config %s: %s %q: %v (%s)", path, name, v, statReason(err), relativeRule(v)), 2)
			}
		}
	}
	return nil
}

// configPathFlags are the flags that name files or folders a command
// reads. Set from a --config file, they are read as on the command line,
// against the working directory (the rule finetune's config.json follows
// too, whose paths a run records absolute), and one that names nothing
// is refused naming the file and the key, before any work.
var configPathFlags = []string{"model", "data", "images", "masks", "input", "train-images", "train-masks",
	"val-images", "val-masks", "calibrate", "check-images", "palette"}

// isLocalPath reports whether the value v of flag name is a local path:
// not a bucket URL, and for --model not a registry name (a model's file
// has a folder or the .onnx extension).
func isLocalPath(name, v string) bool {
	if v == "" || storage.IsURL(v) {
		return false
	}
	return name != "model" || strings.ContainsRune(v, filepath.Separator) || strings.ContainsRune(v, '/') ||
		strings.EqualFold(filepath.Ext(v), ".onnx")
}

// statReason is os.Stat's error without the path, which the caller names.
func statReason(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// relativeRule says how a path from a config file was read.
func relativeRule(p string) string {
	if filepath.IsAbs(p) {
		return "paths in a config file are read as on the command line"
	}
	wd, _ := os.Getwd()
	return "paths in a config file are read as on the command line, a relative one against the working directory, " + wd
}

// parseRecordedRun reads a run's config.json (finetune.ParseRecordedRun).
func parseRecordedRun(path string, b []byte) (*finetune.Config, error) {
	cfg, err := finetune.ParseRecordedRun(b)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--config %s: %v", path, err), 2)
	}
	return cfg, nil
}

// recordedRun returns the run that --config's config.json records, or nil.
// It sets the flags of the run's inputs the command line does not give
// (finetune.RepeatInputs: given are the keys it gives), so that the flags
// make a complete configuration; finetune.Repeat then keeps the recorded
// settings of every flag not given.
func recordedRun(c *cli.Context, path string, given []string, resume bool) (*finetune.Config, error) {
	settings, b, err := readConfigFile(path)
	if err != nil || !finetune.IsRecordedRun(settings) {
		return nil, err
	}
	rec, err := parseRecordedRun(path, b)
	if err != nil {
		return nil, err
	}
	inputs, err := rec.RepeatInputs(given, resume)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--config %s: %v", path, err), 2)
	}
	for key, v := range inputs {
		if err := c.Set(flagOf(key)[2:], v); err != nil {
			return nil, err
		}
	}
	return rec, nil
}
