package cliflag

import (
	"fmt"
	"regexp"
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

// OneLineUsageErrors makes app and every command of it answer a flag it
// cannot parse (an unknown flag, a value that does not parse, a missing
// value) with one error naming the flag as users type it (--lr, where Go's
// flag package writes -lr) and where the flags are listed, exit status 2,
// instead of printing the whole help before the error. A cli.Generic
// value's own message is given as "--flag: message" (ParseError).
func OneLineUsageErrors(app *cli.App) {
	app.OnUsageError = oneLineUsageError(app.Name)
	var install func(cmds []*cli.Command, prefix string)
	install = func(cmds []*cli.Command, prefix string) {
		for _, cmd := range cmds {
			name := prefix + " " + cmd.Name
			install(cmd.Subcommands, name)
			cmd.OnUsageError = oneLineUsageError(name)
		}
	}
	install(app.Commands, app.Name)
}

func oneLineUsageError(command string) cli.OnUsageErrorFunc {
	return func(c *cli.Context, err error, isSubcommand bool) error {
		// The flag package's error is text only; a command's arguments
		// are its parent's, parsed already, so parse them again to learn
		// which flag failed and why. (The app's own arguments are kept
		// nowhere: its rare errors keep the flag package's words.)
		if isSubcommand && c.Command != nil {
			if pe := FindParseError(c.Command.Flags, c.Lineage()[1].Args().Tail()); pe != nil {
				err = pe
			}
		}
		pe, ok := err.(*ParseError)
		if ok && pe.Generic {
			return cli.Exit(pe.Error(), 2)
		}
		msg := err.Error()
		if !ok {
			msg = goFlagDash.ReplaceAllString(msg, "$1--")
		}
		return cli.Exit(fmt.Sprintf("%s (%s --help lists its flags)", msg, command), 2)
	}
}

// goFlagDash finds the single dash before a flag's name in the flag
// package's messages, for the app's own flags only (see above).
var goFlagDash = regexp.MustCompile(`((?:flag|defined:|argument:|for) )-\b`)
