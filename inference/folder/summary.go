package folder

import (
	"fmt"
	"io"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/inference/report"
	"github.com/segtune/segtune/internal/shard"
)

// Summary is a folder run's report, ready for JSON (`segment --json`)
// and with a one-line text form (WriteText).
type Summary struct {
	Images       int                      `json:"images"`
	Succeeded    int                      `json:"succeeded"`
	Skipped      int                      `json:"skipped"` // outputs already there and checked
	Failed       int                      `json:"failed"`
	Failures     []pipeline.FailureRecord `json:"failures"`
	Seconds      float64                  `json:"seconds"`
	ImagesPerSec float64                  `json:"images_per_s"`
	InferSeconds float64                  `json:"infer_seconds"`
	Device       string                   `json:"device"`
	Decoders     string                   `json:"decoders"` // imageio.DecoderInfo: native or Go JPEG/PNG decoders
	Batch        int                      `json:"batch"`
	Output       string                   `json:"output"`
	Shard        string                   `json:"shard,omitempty"` // K/N when sharded
}

// Summarize is the summary of rep, a run of shard s into output on
// device, batch images per model run.
func Summarize(rep pipeline.Report, device string, batch int, output string, s shard.Spec) Summary {
	sum := Summary{
		Images: rep.Total, Succeeded: rep.Succeeded, Skipped: rep.Skipped, Failed: len(rep.Failures),
		Failures: pipeline.FailureRecords(rep.Failures), Seconds: rep.Elapsed.Seconds(), InferSeconds: rep.InferElapsed.Seconds(),
		Device: device, Decoders: imageio.DecoderInfo(), Batch: batch, Output: output,
	}
	if s.Sharded() {
		sum.Shard = s.String()
	}
	if sum.Seconds > 0 {
		sum.ImagesPerSec = float64(rep.Succeeded) / sum.Seconds
	}
	return sum
}

// WriteText writes the summary's line: the images segmented, of which
// shard, those already done, where, and how fast.
func (s Summary) WriteText(w io.Writer) error {
	what := ""
	if s.Shard != "" {
		what = fmt.Sprintf(" (shard %s)", s.Shard)
	}
	if s.Skipped > 0 {
		what += fmt.Sprintf(" (%d already done)", s.Skipped)
	}
	_, err := fmt.Fprintf(w, "segmented %d of %d images%s into %s in %.1fs (%.2f images/s, %s, batch %d)\n",
		s.Succeeded, s.Images, what, s.Output, s.Seconds, s.ImagesPerSec, s.Device, s.Batch)
	return err
}

// Print prints the summary with p: an error when any image failed.
func (s Summary) Print(p report.Printer) error {
	return p.Write(s, report.Run{Images: s.Images, Failed: s.Failed, Failures: s.Failures, Text: s.WriteText})
}
