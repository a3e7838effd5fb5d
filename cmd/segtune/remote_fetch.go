package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/resolve"
)

// mirrorFolder copies the image files under the bucket folder v into the
// cache (resolve.MirrorFolder) and returns the local folder; a local
// folder is returned as it is. flag names the flag in errors and the
// notice.
func mirrorFolder(c *cli.Context, flag, v string) (string, error) {
	m, err := resolve.MirrorFolder(c.Context, v)
	if err != nil {
		if fe, ok := err.(*resolve.FolderError); ok {
			return "", cli.Exit(fmt.Sprintf("--%s %s", flag, fe), 2)
		}
		return "", err
	}
	if m.Remote {
		notef(c, "segtune: --%s %s: %d images in %s (%d fetched, %d removed)", flag, m.Source, m.Images, m.Dir, m.Fetched, m.Removed)
	}
	return m.Dir, nil
}
