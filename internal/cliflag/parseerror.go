package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/setting"
)

// ParseError is why a command line does not parse, found by parsing it
// again flag by flag (FindParseError): the flag package's own error is
// text only.
type ParseError struct {
	// Flag is the flag's name as given, without dashes.
	Flag string
	// Value is the value that did not parse ("" for the other kinds).
	Value string
	// Err is what the flag's value said of Value; nil when the flag is
	// unknown or its value is missing.
	Err error
	// Unknown: the command has no such flag; else, Err nil: the value is
	// missing.
	Unknown bool
	// Generic: the flag is a cli.Generic value, whose message is meant
	// for users as it is.
	Generic bool
}

func (e *ParseError) Error() string {
	var se *setting.Error
	switch {
	case e.Unknown:
		return "flag provided but not defined: --" + e.Flag
	case e.Err == nil:
		return "flag needs an argument: --" + e.Flag
	case e.Generic && errors.As(e.Err, &se): // a library's error keyed by its setting
		return setting.Rename(e.Err, func(string) string { return "--" + e.Flag }).Error()
	case e.Generic:
		return fmt.Sprintf("--%s: %v", e.Flag, e.Err)
	}
	return fmt.Sprintf("invalid value %q for flag --%s: %v", e.Value, e.Flag, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// FindParseError parses args with flags as the flag package does, on a
// flag set of its own, and returns the first flag that fails (nil if
// none does).
func FindParseError(flags []cli.Flag, args []string) *ParseError {
	set := flag.NewFlagSet("", flag.ContinueOnError)
	set.SetOutput(io.Discard)
	generic := map[string]bool{}
	for _, f := range flags {
		if f.Apply(set) != nil {
			return nil
		}
		if _, ok := f.(*cli.GenericFlag); ok {
			for _, n := range f.Names() {
				generic[n] = true
			}
		}
	}
	for len(args) > 0 {
		a := args[0]
		args = args[1:]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			return nil // the flags end here
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f := set.Lookup(name)
		if f == nil {
			return &ParseError{Flag: name, Unknown: true}
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue && len(args) > 0 {
			value, hasValue, args = args[0], true, args[1:]
		}
		if !hasValue {
			return &ParseError{Flag: name}
		}
		if err := f.Value.Set(value); err != nil {
			return &ParseError{Flag: name, Value: value, Err: err, Generic: generic[name]}
		}
	}
	return nil
}
