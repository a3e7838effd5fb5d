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
		// The flag package's error is text only: parse the arguments again
		// to learn which flag failed and why. A command's are its
		// parent's, parsed already; the app's own are kept by Run.
		var flags []cli.Flag
		var args []string
		if isSubcommand && c.Command != nil {
			flags, args = c.Command.Flags, c.Lineage()[1].Args().Tail()
		} else if a, ok := c.App.Metadata[argsKey].([]string); ok && len(a) > 0 {
			flags, args = c.App.Flags, a[1:]
		}
		if pe := FindParseError(flags, args); pe != nil {
			if pe.Generic {
				return cli.Exit(pe.Error(), 2)
			}
			err = pe
		}
		return cli.Exit(fmt.Sprintf("%s (%s --help lists its flags)", err, command), 2)
	}
}

// argsKey holds, in an app's Metadata, the arguments Run gave it.
const argsKey = "cliflag.args"

// Run runs app with args (os.Args for a program), keeping them where
// OneLineUsageErrors finds them for the app's own flags: urfave keeps no
// copy. (Run by app.Run, an app's own flag that does not parse is told in
// the flag package's words.)
func Run(app *cli.App, args []string) error {
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[argsKey] = args
	return app.Run(args)
}
