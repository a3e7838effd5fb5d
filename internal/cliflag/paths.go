package cliflag

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/storage"
)

// FileURLsToPaths replaces each file:// value of c's string flags by the
// local path it names, so that every later check and open sees one plain
// path. A file URL that names no local file (file://host/...) or a known
// scheme without its // (file:out, s3:bucket) is an error naming the flag.
func FileURLsToPaths(c *cli.Context) error {
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
			return fmt.Errorf("--%s %s: %v", name, v, err)
		}
		if l.IsLocal() {
			if err := c.Set(name, l.Local); err != nil {
				return err
			}
		}
	}
	return nil
}
