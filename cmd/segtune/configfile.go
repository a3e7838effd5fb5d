package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/regfile"
)

// configCommands take --config FILE.
var configCommands = map[string]bool{"finetune": true, "segment": true, "eval": true, "export": true, "serve": true}

// maxConfigBytes bounds a --config file: flag values, not data.
const maxConfigBytes = 1 << 20

func configFlag() cli.Flag {
	return &cli.StringFlag{Name: "config", Usage: "read flag values from `FILE`: YAML or JSON, flag names to values " +
		"(e.g. `lr: 3e-4` or `mean: [0.485, 0.456, 0.406]`); flags on the command line win; paths are read as on the " +
		"command line. finetune also takes an earlier run's config.json and repeats that run (flags given change it)"}
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
		cmd.Flags = append(cmd.Flags, configFlag())
		required := unrequire(cmd.Flags)
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if err := applyConfigFile(c); err != nil {
				return err
			}
			if err := requireFlags(c, required...); err != nil { // the parser's check, after the file
				return err
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
}

// unrequire clears the Required mark of flags and returns their names: the
// command-line parser would otherwise refuse a required flag that the
// --config file gives.
func unrequire(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			if field := reflect.ValueOf(f).Elem().FieldByName("Required"); field.CanSet() {
				field.SetBool(false)
				names = append(names, f.Names()[0])
			}
		}
	}
	return names
}

// readConfigFile reads --config's file into flag names and values; nil
// without --config.
func readConfigFile(c *cli.Context) (map[string]any, []byte, error) {
	path := c.String("config")
	if path == "" {
		return nil, nil, nil
	}
	b, err := regfile.ReadSmall(path, maxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--config: %w", err)
	}
	var settings map[string]any
	if err := yaml.Unmarshal(b, &settings); err != nil { // YAML reads JSON too
		return nil, nil, fmt.Errorf("--config %s: not a YAML or JSON mapping of flag names to values: %w", path, err)
	}
	if settings == nil {
		return nil, nil, fmt.Errorf("--config %s: no settings in it", path)
	}
	return settings, b, nil
}

// applyConfigFile sets each flag that --config's file names and the
// command line does not. A name that is not a flag of the command is an
// error naming it: a misspelt setting would otherwise be lost. A run's
// config.json given to finetune is left to recordedRun.
func applyConfigFile(c *cli.Context) error {
	settings, b, err := readConfigFile(c)
	if settings == nil || err != nil {
		return err
	}
	if c.Command.Name == "finetune" && isRecordedRun(settings) {
		_, err := parseRecordedRun(c.String("config"), b)
		return err
	}
	path := c.String("config")
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	slices.Sort(names) // one order, so that the first error is always the same
	for _, name := range names {
		flag := commandFlag(c.Command, name)
		if flag == nil || name == "config" {
			return cli.Exit(fmt.Sprintf("--config %s: %q is not a flag of segtune %s (see segtune %s --help)", path, name, c.Command.Name, c.Command.Name), 2)
		}
		if flagIsSet(c, flag) {
			continue // the command line wins
		}
		values, err := configValues(settings[name], isSliceFlag(flag))
		if err != nil {
			return cli.Exit(fmt.Sprintf("--config %s: %s: %v", path, name, err), 2)
		}
		for _, v := range values {
			if err := c.Set(flag.Names()[0], v); err != nil {
				return cli.Exit(fmt.Sprintf("--config %s: %s %q: %v", path, name, v, err), 2)
			}
		}
	}
	return nil
}

func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func flagIsSet(c *cli.Context, f cli.Flag) bool {
	return slices.ContainsFunc(f.Names(), c.IsSet)
}

func isSliceFlag(f cli.Flag) bool {
	switch f.(type) {
	case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return true
	}
	return false
}

// configValues writes a file's value as the flag values the command line
// would carry: a scalar as itself, a list as one value per element for a
// list flag, or comma-separated for the others (--mean 0.5,0.5,0.5).
func configValues(v any, slice bool) ([]string, error) {
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, e := range list {
			s, err := configScalar(e)
			if err != nil {
				return nil, err
			}
			parts[i] = s
		}
		if slice {
			return parts, nil
		}
		return []string{strings.Join(parts, ",")}, nil
	}
	s, err := configScalar(v)
	if err != nil {
		return nil, err
	}
	return []string{s}, nil
}

func configScalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case nil:
		return "", errors.New("no value")
	}
	return "", fmt.Errorf("%v is not a flag value (a string, number, boolean or list of them)", v)
}

// isRecordedRun reports whether a --config file is a fine-tuning run's
// config.json (finetune.Config) rather than flag values: it names the
// run's network and data.
func isRecordedRun(settings map[string]any) bool {
	_, network := settings["network"]
	_, train := settings["train"]
	return network && train
}

// parseRecordedRun reads a run's config.json, refusing fields it does not
// know: settings it would drop would not repeat the run.
func parseRecordedRun(path string, b []byte) (*finetune.Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cfg finetune.Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, cli.Exit(fmt.Sprintf("--config %s: not a fine-tuning run's config.json: %v", path, err), 2)
	}
	return &cfg, nil
}

// recordedRun returns the run that --config's config.json records, or nil.
// It sets --model and the data flags to the run's, where the command line
// gives none of them, so that the flags make a complete configuration;
// finetune.Repeat then keeps the recorded settings of every flag not given.
func recordedRun(c *cli.Context) (*finetune.Config, error) {
	settings, b, err := readConfigFile(c)
	if err != nil || !isRecordedRun(settings) {
		return nil, err
	}
	rec, err := parseRecordedRun(c.String("config"), b)
	if err != nil {
		return nil, err
	}
	set := func(flag, v string) error {
		if v == "" {
			return nil
		}
		return c.Set(flag, v)
	}
	if !c.IsSet("model") && !c.Bool("resume") {
		if err := set("model", rec.Network.BaseModel); err != nil {
			return nil, err
		}
	}
	if slices.ContainsFunc([]string{"data", "train-images", "train-masks", "val-images", "val-masks"}, c.IsSet) {
		return rec, nil
	}
	for flag, v := range map[string]string{"train-images": rec.Train.Images, "train-masks": rec.Train.Masks,
		"val-images": rec.Val.Images, "val-masks": rec.Val.Masks} {
		if err := set(flag, v); err != nil {
			return nil, err
		}
	}
	if rec.Train.Images == "" { // a data folder in a layout
		for flag, v := range map[string]string{"data": rec.Train.Data, "format": rec.Train.Format, "split": rec.Train.Split} {
			if err := set(flag, v); err != nil {
				return nil, err
			}
		}
	}
	return rec, nil
}
