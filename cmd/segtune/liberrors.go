package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/datalayout"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/onnx/quantize"
)

// The libraries name the setting an error is about by its field; the user
// set it with a flag. nameFlags wraps every command's action so that its
// errors name the flag instead.

// settingFlags maps finetune.SettingError's fields to the flags that set
// them.
var settingFlags = map[string]string{
	"Precision": "--precision",
	"Resident":  "--resident",
	"Batch":     "--batch",
	"RunDir":    "--out",
}

// nameFlags makes the actions of cmds (and their subcommands) report
// library errors by flag (withFlagNames).
func nameFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		nameFlags(cmd.Subcommands)
		if cmd.Action == nil {
			continue
		}
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error { return withFlagNames(action(c)) }
	}
}

// withFlagNames returns err with the part a library wrote about a setting
// rewritten to name its flag; the error it wraps stays reachable.
func withFlagNames(err error) error {
	var se *finetune.SettingError
	if errors.As(err, &se) {
		if flag, ok := settingFlags[se.Field]; ok {
			return renamed(err, se.Error(), fmt.Sprintf("%s %s: %v", flag, se.Value, se.Err))
		}
	}
	var ke *quantize.UnmatchedKeepError
	if errors.As(err, &ke) {
		return renamed(err, ke.Error(), fmt.Sprintf("--keep-float names %s, which no node of the model has as op type, name or output", strings.Join(ke.Names, ", ")))
	}
	var nr *finetune.NotRunDirError
	if errors.As(err, &nr) {
		return renamed(err, "run folder "+nr.Dir, "--out "+nr.Dir)
	}
	var ae *datalayout.AmbiguousError
	if errors.As(err, &ae) {
		return renamed(err, "name its layout, or point at one of them", "name the layout with --format, or point --data at one of them")
	}
	var sp *datalayout.SplitError
	if errors.As(err, &sp) {
		switch {
		case sp.Split == "":
			return renamed(err, ": pick one", ": pick one with --split")
		case len(sp.Have) == 0:
			return renamed(err, "split "+sp.Split+" was asked for", "--split "+sp.Split+" names one")
		}
	}
	return err
}

// renamed is err with its message's part old replaced by new.
func renamed(err error, old, new string) error {
	return &renamedError{err: err, msg: strings.Replace(err.Error(), old, new, 1)}
}

type renamedError struct {
	err error
	msg string
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }
