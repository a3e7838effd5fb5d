package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/storage"
)

// normalizePathFlags makes every command turn a file:// URL given to any of
// its string flags (--input, --output, --images, --masks, --data, --out,
// --model, ...) into the local path it names, before anything else reads
// the flags: every later check — the overlap guards, the protected files,
// the run-folder rules — and every open then sees the one plain path.
func normalizePathFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		normalizePathFlags(cmd.Subcommands)
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if err := fileURLsToPaths(c); err != nil {
				return err
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
}

// fileURLsToPaths replaces each file:// value of c's string flags by its
// path; a file URL that names no local file (file://host/...) or a known
// scheme without its // (file:out, s3:bucket) is an error naming the flag.
func fileURLsToPaths(c *cli.Context) error {
	if c.Command == nil {
		return nil
	}
	for _, f := range c.Command.Flags {
		if _, ok := f.(*cli.StringFlag); !ok {
			continue
		}
		name := f.Names()[0]
		v := c.String(name)
		if !storage.NamesScheme(v) {
			continue
		}
		l, err := storage.Parse(v)
		if err != nil {
			return cli.Exit(fmt.Sprintf("--%s %s: %v", name, v, err), 2)
		}
		if !l.IsLocal() {
			continue
		}
		if err := c.Set(name, l.Local); err != nil {
			return err
		}
	}
	return nil
}
