package main

import (
	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/samples"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// predictor segments paths for the contact sheet with a model opened in
// session, and returns the labels by path.
func predictor(c *cli.Context, session runtime.Options) samples.Predictor {
	return func(model string, pre imageio.Preprocess, paths []string) (map[string][]uint8, error) {
		seg, err := openModel(c, model, imageio.Sidecar{Preprocess: &pre}, resolve.SegmenterOptions{Session: sessionFor(c, session)})
		if err != nil {
			return nil, err
		}
		defer seg.Close()
		return samples.Predict(seg, paths)
	}
}

// reportSamples writes the contact sheet of a finished finetune run into its
// folder and says where (samples.ReportRun).
func reportSamples(c *cli.Context, res *finetune.Result, session runtime.Options) {
	samples.ReportRun(noticeWriter(c), res, predictor(c, session))
}
