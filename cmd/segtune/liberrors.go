package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
)

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

// flagNotice is finetune's notice n as the CLI words it: by flag.
func flagNotice(n finetune.Notice) string {
	switch n := n.(type) {
	case finetune.ResumedNotice:
		return "resuming with " + flagChanges(n.Changes, "%s %s (was %s)")
	case finetune.InterruptedNotice:
		return fmt.Sprintf("interrupted: saved %s at step %d; continue with --resume", n.Checkpoint, n.Step)
	case finetune.FallbackNotice:
		return fmt.Sprintf("segtune: %s %s: %s", flagOf(n.Setting), n.Value, n.Reason)
	case finetune.DefaultNotice:
		return fmt.Sprintf("segtune: %s %s: %s (%s; %s overrides it)", flagOf(n.Setting), n.Value, n.Chosen, n.Why, flagOf(n.Override))
	}
	return n.String()
}

// flagChanges lists changed settings of a run by flag, each as format
// writes its flag, value and the run's value.
func flagChanges(changes []finetune.SettingChange, format string) string {
	var parts []string
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf(format, flagOf(c.Setting), c.Value, c.Was))
	}
	return strings.Join(parts, ", ")
}
