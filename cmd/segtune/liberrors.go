package main

import "github.com/urfave/cli/v2"

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
