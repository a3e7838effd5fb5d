package main

import (
	"io"

	"github.com/urfave/cli/v2"

	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/resolve"
)

// downloadUI shows model downloads: a byte bar on a terminal (not with
// --quiet or --json) and notices unless --quiet.
func downloadUI(c *cli.Context) resolve.DownloadUI {
	ui := resolve.DownloadUI{Note: func(s string) { notef(c, "segtune: %s", s) }}
	if !c.IsSet("json") && progressui.Shown(globals(c).Quiet) {
		ui.NewBar = func(name string, size, have int64) io.WriteCloser { return progressui.Bytes(name, size, have) }
	}
	return ui
}
