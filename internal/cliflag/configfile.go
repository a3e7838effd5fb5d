package cliflag

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/storage"
)

// MaxConfigBytes bounds a --config file: flag values, not data.
const MaxConfigBytes = 1 << 20

// InstallConfigFiles gives each command of cmds that takes(name) a --config
// flag (its own, else one newFlag makes) whose file apply reads before any
// other check reads the flags (install it last: it then runs first). The
// commands' required flags may come from the file, so they are checked
// after it.
func InstallConfigFiles(cmds []*cli.Command, takes func(name string) bool, newFlag func(command string, path *string) cli.Flag, apply func(c *cli.Context, path string) error) {
	for _, cmd := range cmds {
		if !takes(cmd.Name) {
			continue
		}
		path := configPath(cmd, newFlag)
		required := Unrequire(cmd.Flags)
		Before(cmd, func(c *cli.Context) error {
			if err := apply(c, *path); err != nil {
				return err
			}
			return Require(c, required...) // the parser's check, after the file
		})
	}
}

// configPath is where cmd's --config goes: its own flag's value (a command
// may read it again), else a flag added here.
func configPath(cmd *cli.Command, newFlag func(command string, path *string) cli.Flag) *string {
	for _, f := range cmd.Flags {
		if sf, ok := f.(*cli.StringFlag); ok && sf.Name == "config" {
			return sf.Destination
		}
	}
	path := new(string)
	cmd.Flags = append(cmd.Flags, newFlag(cmd.Name, path))
	return path
}

// ReadConfigFile reads --config's file at path into flag names and values,
// and its bytes; nil without --config.
func ReadConfigFile(path string) (map[string]any, []byte, error) {
	if path == "" {
		return nil, nil, nil
	}
	b, err := regfile.ReadSmall(path, MaxConfigBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--config: %w", err)
	}
	settings, err := ParseFile(path, b)
	if err != nil {
		return nil, nil, fmt.Errorf("--config %w", err)
	}
	return settings, b, nil
}

// ApplyConfigFile sets each flag that the settings of --config's file at
// path name and the command line does not (Apply). Of pathFlags, the flags
// that name files or folders a command reads, one set from the file is
// read as on the command line, against the working directory, and one
// that names nothing is refused naming the file and the key, before any
// work.
func ApplyConfigFile(c *cli.Context, path string, settings map[string]any, pathFlags []string) error {
	unset := map[string]bool{}
	for _, name := range pathFlags {
		unset[name] = !c.IsSet(name)
	}
	if err := Apply(c, settings, "config"); err != nil {
		return cli.Exit(fmt.Sprintf("--config %s: %v", path, err), 2)
	}
	for _, name := range pathFlags {
		if v := c.String(name); unset[name] && c.IsSet(name) && isLocalPath(name, v) {
			if _, err := os.Stat(v); err != nil {
				return cli.Exit(fmt.Sprintf("--config %s: %s %q: %v (%s)", path, name, v, statReason(err), relativeRule(v)), 2)
			}
		}
	}
	return nil
}

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
