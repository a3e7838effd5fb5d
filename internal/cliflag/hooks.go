package cliflag

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Before makes cmd run hook before its own Before hook (and so before its
// action); an error from hook stops the command. Installed several times,
// the hook installed last runs first.
func Before(cmd *cli.Command, hook cli.BeforeFunc) {
	before := cmd.Before
	cmd.Before = func(c *cli.Context) error {
		if err := hook(c); err != nil {
			return err
		}
		if before != nil {
			return before(c)
		}
		return nil
	}
}

// BeforeAll installs hook (Before) on every command of cmds and on their
// subcommands.
func BeforeAll(cmds []*cli.Command, hook cli.BeforeFunc) {
	for _, cmd := range cmds {
		BeforeAll(cmd.Subcommands, hook)
		Before(cmd, hook)
	}
}

// Require is urfave/cli's check of required flags, with its message, for
// flags whose Required mark was cleared (Unrequire).
func Require(c *cli.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, n)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("Required flag %q not set", missing[0])
	}
	return fmt.Errorf("Required flags %q not set", strings.Join(missing, ", "))
}
