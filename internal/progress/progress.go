// Package progress draws segtune's progress bars on stderr, and only
// where stderr is a terminal: a bar in a log file is noise.
package progress

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Shown reports whether bars are drawn: stderr is a terminal and the user
// did not ask for quiet.
func Shown(quiet bool) bool { return !quiet && term.IsTerminal(int(os.Stderr.Fd())) }

// Items is a bar counting images of what (a silent one unless show).
func Items(total int, what string, show bool) *progressbar.ProgressBar {
	if !show {
		return progressbar.DefaultSilent(int64(total), what)
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("img"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100_000_000),
	)
}

// Steps shows training: steps, loss, throughput and time left (nothing
// unless shown).
type Steps struct {
	bar *progressbar.ProgressBar
}

// NewSteps is a bar of total steps (drawing nothing unless show).
func NewSteps(total int64, show bool) *Steps {
	if !show {
		return &Steps{}
	}
	return &Steps{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(200_000_000),
		progressbar.OptionFullWidth(),
	)}
}

// Update moves the bar to step, in epoch (from 0) of epochs.
func (s *Steps) Update(epoch, epochs int, loss, imagesPerSec float64, step int64) {
	if s.bar == nil {
		return
	}
	s.bar.Describe(fmt.Sprintf("epoch %d/%d  loss %.4f  %.1f img/s", epoch+1, epochs, loss, imagesPerSec))
	s.bar.Set64(step)
}

// Clear removes the bar so that a line can be printed in its place.
func (s *Steps) Clear() {
	if s.bar != nil {
		s.bar.Clear()
	}
}

// Bytes is a bar of a download of name, size bytes of which have are
// there already; written bytes move it.
func Bytes(name string, size, have int64) io.WriteCloser {
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
