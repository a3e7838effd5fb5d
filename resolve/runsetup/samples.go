package runsetup

import (
	"io"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/samples"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// ReportSamples writes the contact sheet of the finished run res into its
// folder and says where on notes (samples.ReportRun), the models
// segmenting in session.
func ReportSamples(notes io.Writer, res *finetune.Result, session runtime.Options) {
	samples.ReportRun(notes, res, Predictor(session, notes))
}

// Predictor segments a contact sheet's images with the model opened in
// session (resolve.OpenSegmenter) at the sheet's preprocessing, its
// notices on notes.
func Predictor(session runtime.Options, notes io.Writer) samples.Predictor {
	session.Log = notes
	return func(model string, pre imageio.Preprocess, paths []string) (map[string][]uint8, error) {
		seg, err := resolve.OpenSegmenter(model, imageio.Sidecar{Preprocess: &pre}, resolve.SegmenterOptions{Session: session, Notes: notes})
		if err != nil {
			return nil, err
		}
		defer seg.Close()
		return samples.Predict(seg, paths)
	}
}
