package preprocsearch

import (
	"strings"
	"testing"
)

// The report ranks the candidates, notes the current one and those not
// scored, and says how to score more images naming the setting the
// caller's way.
func TestReportNamesSampleAndChoice(t *testing.T) {
	res := &Result{Images: 8, Available: 12, Resamples: 1000, Chosen: 0, Scores: []Score{
		{Candidate: Candidate{Name: "BGR -1..1"}, MeanIoU: 0.9},
		{Candidate: Candidate{Name: "RGB 0..1", Current: true}, MeanIoU: 0.5},
		{Candidate: Candidate{Name: "RGB 0..255"}, Err: "bad"},
	}}
	rows := res.TableRows()
	if got := strings.Join(rows[1], "|") + " " + strings.Join(rows[2], "|"); got != "2|RGB 0..1|0.5000|current 3|RGB 0..255|-|not scored: bad" {
		t.Errorf("rows: %s", got)
	}
	var b strings.Builder
	res.WriteVerdict(&b, func(k string) string { return "<" + k + ">" })
	want := "\nscored on 8 of 12 labelled images (<sample> N scores more)\nbest: BGR -1..1, ahead of every other beyond the noise of 8 images\nchosen: BGR -1..1 (mIoU 0.9000)\n"
	if b.String() != want {
		t.Errorf("verdict:\n%q\nwant\n%q", b.String(), want)
	}
}
