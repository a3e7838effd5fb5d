package report

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/segtune/segtune/inference/pipeline"
)

// A summary prints as text after its failures, or as JSON alone; a run
// where images failed ends in *FailedError, exit status 1.
func TestPrinterWrite(t *testing.T) {
	run := Run{Images: 3, Failed: 1, Failures: []pipeline.FailureRecord{{Path: "a.png", Error: "bad"}},
		Text: func(w io.Writer) error { _, err := io.WriteString(w, "text\n"); return err }}
	var out, errOut bytes.Buffer
	err := Printer{Out: &out, Err: &errOut, Prefix: "p: "}.Write(map[string]int{"n": 1}, run)
	var failed *FailedError
	if !errors.As(err, &failed) || err.Error() != "1 of 3 images failed" || failed.ExitCode() != 1 {
		t.Errorf("err = %v, want 1 of 3 images failed, status 1", err)
	}
	if out.String() != "text\n" || errOut.String() != "p: skipped a.png: bad\n" {
		t.Errorf("out %q, err %q", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	run.Failed = 0
	if err := (Printer{Out: &out, Err: &errOut, JSON: true}).Write(map[string]int{"n": 1}, run); err != nil {
		t.Fatal(err)
	}
	if out.String() != "{\n  \"n\": 1\n}\n" || errOut.Len() != 0 {
		t.Errorf("JSON: out %q, err %q", out.String(), errOut.String())
	}
}
