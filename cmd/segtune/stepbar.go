package main

import (
	"io"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/resolve"
)

// stepBar shows training progress (progressui.Steps).
type stepBar struct{ steps *progressui.Steps }

// newStepBarFor shows a bar on a terminal, not with --quiet or asJSON.
func newStepBarFor(c *cli.Context, total int64, asJSON bool) *stepBar {
	return &stepBar{progressui.NewSteps(total, !asJSON && progressui.Shown(globals(c).Quiet))}
}

func (b *stepBar) update(s finetune.StepInfo) {
	b.steps.Update(s.Epoch, s.Epochs, s.Loss, s.ImagesPerSec, s.Step)
}

// clear removes the bar so that a line can be printed in its place.
func (b *stepBar) clear() { b.steps.Clear() }

// downloadUI shows model downloads: a byte bar on a terminal (not with
// --quiet or --json) and notices unless --quiet.
func downloadUI(c *cli.Context) resolve.DownloadUI {
	ui := resolve.DownloadUI{Note: func(s string) { notef(c, "segtune: %s", s) }}
	if !c.IsSet("json") && progressui.Shown(globals(c).Quiet) {
		ui.NewBar = func(name string, size, have int64) io.WriteCloser { return progressui.Bytes(name, size, have) }
	}
	return ui
}
