package cliflag

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// ParseFile reads the contents b of a settings file, a YAML or JSON
// mapping of flag names to values (YAML reads JSON too). path names the
// file in errors.
// A file of several YAML documents is refused: only the first would be
// read, and the settings of the others silently lost.
func ParseFile(path string, b []byte) (map[string]any, error) {
	var settings map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&settings); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: not a YAML or JSON mapping of flag names to values: %s", path, firstLines(err.Error(), 4))
	}
	if settings == nil {
		return nil, fmt.Errorf("%s: no settings in it", path)
	}
	var next yaml.Node
	if err := dec.Decode(&next); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: holds more than one YAML document (a line '---' starts another); put every setting in the first", path)
	}
	return settings, nil
}

// Apply sets each flag of c's command that settings names and the command
// line does not: the command line wins. A name that is not a flag of the
// command, or is fileFlag (the flag that named the file), is an error
// naming it, since a misspelt setting would otherwise be lost. Names are
// taken in sorted order, so that the first error is always the same.
//
// Two names of one flag (m and model) are refused too: one of them would
// win unseen.
func Apply(c *cli.Context, settings map[string]any, fileFlag string) error {
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		flag := commandFlag(c.Command, name)
		if flag == nil || name == fileFlag {
			cmd := c.App.Name + " " + c.Command.Name
			return fmt.Errorf("%q is not a flag of %s (see %s --help)", name, cmd, cmd)
		}
		for _, other := range flag.Names() {
			if _, ok := settings[other]; ok && other != name {
				return fmt.Errorf("%q and %q name the same flag: give one", min(name, other), max(name, other))
			}
		}
		if slices.ContainsFunc(flag.Names(), c.IsSet) {
			continue
		}
		values, err := Values(settings[name], isSliceFlag(flag))
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		for _, v := range values {
			if err := c.Set(flag.Names()[0], v); err != nil {
				return fmt.Errorf("%s %q: %v", name, v, err)
			}
		}
	}
	return nil
}

// Unrequire clears the Required mark of flags and returns their names: the
// parser would otherwise refuse a required flag that a settings file
// gives. Check them with Require after the file is applied.
func Unrequire(flags []cli.Flag) []string {
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

func commandFlag(cmd *cli.Command, name string) cli.Flag {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return f
		}
	}
	return nil
}

func isSliceFlag(f cli.Flag) bool {
	switch f.(type) {
	case *cli.StringSliceFlag, *cli.IntSliceFlag, *cli.Int64SliceFlag, *cli.Float64SliceFlag, *cli.UintSliceFlag, *cli.Uint64SliceFlag:
		return true
	}
	return false
}

// Values writes a file's value as the flag values a command line would
// carry: a scalar as itself, a list as one value per element for a list
// flag (slice), or comma-separated for the others (--mean 0.5,0.5,0.5).
func Values(v any, slice bool) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		s, err := scalar(v)
		return []string{s}, err
	}
	parts := make([]string, len(list))
	for i, e := range list {
		s, err := scalar(e)
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

func scalar(v any) (string, error) {
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
	return "", fmt.Errorf("%s is not a flag value (a string, number, boolean or list of them)", describe(v))
}

// firstLines keeps the first n lines of a message and counts the rest
// (the YAML parser lists every fault of a file, one a line).
func firstLines(msg string, n int) string {
	lines := strings.Split(msg, "\n")
	if len(lines) <= n {
		return msg
	}
	return fmt.Sprintf("%s\n  (and %d more)", strings.Join(lines[:n], "\n"), len(lines)-n)
}

// describe names a value that is no flag value by its kind, without
// printing it: a nested mapping may be kilobytes long.
func describe(v any) string {
	switch x := v.(type) {
	case map[string]any:
		return "a mapping of " + count(len(x), "key")
	case []any:
		return "a list of " + count(len(x), "value") + " nested in the list"
	}
	s := fmt.Sprint(v)
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// count is "1 key", "2 keys".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
