package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/resolve"
)

// stepBar shows training progress: steps, loss, throughput and time left.
type stepBar struct {
	bar *progressbar.ProgressBar
}

// newStepBarFor shows a bar on a terminal, not with --quiet or asJSON.
func newStepBarFor(c *cli.Context, total int64, asJSON bool) *stepBar {
	if globals(c).Quiet || asJSON || !term.IsTerminal(int(os.Stderr.Fd())) {
		return &stepBar{}
	}
	return &stepBar{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(200_000_000),
		progressbar.OptionFullWidth(),
	)}
}

func (b *stepBar) update(s finetune.StepInfo) {
	if b.bar == nil {
		return
	}
	b.bar.Describe(fmt.Sprintf("epoch %d/%d  loss %.4f  %.1f img/s", s.Epoch+1, s.Epochs, s.Loss, s.ImagesPerSec))
	b.bar.Set64(s.Step)
}

// clear removes the bar so that a line can be printed in its place.
func (b *stepBar) clear() {
	if b.bar != nil {
		b.bar.Clear()
	}
}

// downloadUI shows model downloads: a byte bar on a terminal (not with
// --quiet or --json) and notices unless --quiet.
func downloadUI(c *cli.Context) resolve.DownloadUI {
	ui := resolve.DownloadUI{Note: func(s string) { notef(c, "segtune: %s", s) }}
	if globals(c).Quiet || c.IsSet("json") || !term.IsTerminal(int(os.Stderr.Fd())) {
		return ui
	}
	ui.NewBar = func(name string, size, have int64) io.WriteCloser {
		bar := progressbar.NewOptions64(size,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("downloading "+name),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(200_000_000),
			progressbar.OptionFullWidth(),
		)
		bar.Set64(have)
		return bar
	}
	return ui
}
