// Package report prints a run's summary over images the one way every
// command does: as indented JSON, or as text after naming the images that
// failed; a run where any failed ends in *FailedError.
package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/segtune/segtune/inference/pipeline"
)

// JSON writes v on w as indented JSON, one value a line.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// FailedError is a run in which Failed of Images images failed; its exit
// status is 1 (the images were named as the run reported).
type FailedError struct{ Failed, Images int }

func (e *FailedError) Error() string {
	return fmt.Sprintf("%d of %d images failed", e.Failed, e.Images)
}

// ExitCode is the status a program exits with: 1, the run's work was
// done but not all of it.
func (e *FailedError) ExitCode() int { return 1 }

// Run is a run's summary: its counts and failures, and its text form.
type Run struct {
	Images, Failed int
	Failures       []pipeline.FailureRecord
	Text           func(io.Writer) error
}

// Printer is where and how summaries are printed: on Out, as JSON or as
// text after each failure named on Err, its lines led by Prefix.
type Printer struct {
	Out, Err io.Writer
	Prefix   string
	JSON     bool
}

// Write prints summary, whose counts and text are r; *FailedError when
// any image failed.
func (p Printer) Write(summary any, r Run) error {
	var err error
	if p.JSON {
		err = JSON(p.Out, summary)
	} else {
		for _, f := range r.Failures {
			fmt.Fprintf(p.Err, "%sskipped %s: %s\n", p.Prefix, f.Path, f.Error)
		}
		err = r.Text(p.Out)
	}
	if err == nil && r.Failed > 0 {
		return &FailedError{Failed: r.Failed, Images: r.Images}
	}
	return err
}
