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
// folder and says where on stderr; a run without validation images (or any
// failure) gets a notice instead, as the run itself succeeded.
func reportSamples(c *cli.Context, res *finetune.Result, session runtime.Options) {
	rs, err := samples.WriteRun(res, predictor(c, session))
	if err != nil {
		notef(c, "segtune: no %s: %v", samples.File, err)
		return
	}
	if rs.TensorBoard != nil {
		notef(c, "segtune: the contact sheet is not in TensorBoard: %v", rs.TensorBoard)
	}
	notef(c, "segtune: contact sheet of the smallest and largest validation objects: %s", rs.Path)
}
