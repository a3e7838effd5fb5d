package evaluate_test

import (
	"context"
	"fmt"
	"os"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/resolve"
)

// A Go program scores a model that `segtune export` wrote (with its
// sidecar of settings) on a bucket's images and masks, as shard 0 of 4 of
// a job, keeps the shard's partial for `segtune eval merge` (or
// evaluate.Merge), and prints the report as `segtune eval` does. Not run:
// it needs ONNX Runtime, the model and a bucket.
func Example() {
	ctx := context.Background()
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(1) }
	const modelPath = "out/refined.onnx"
	settings, _, err := imageio.LoadModelSidecar(modelPath)
	if err != nil || settings.Preprocess == nil {
		fail(fmt.Errorf("%s: no preprocessing settings (%v)", modelPath, err))
	}
	imgs, err := storage.OpenFolder(ctx, "s3://my-bucket/val/images")
	if err != nil {
		fail(err)
	}
	defer imgs.Close()
	masks, err := storage.OpenFolder(ctx, "s3://my-bucket/val/masks")
	if err != nil {
		fail(err)
	}
	defer masks.Close()

	req := evaluate.Request{Model: modelPath, Settings: *settings, Images: imgs, Masks: masks,
		Shard: shard.Spec{Index: 0, Count: 4}, Batch: 4, Options: evaluate.SetupOptions{SizeClasses: []int{1}},
		Open: func(path string, s imageio.Sidecar) (*inference.Segmenter, error) {
			return resolve.OpenSegmenter(path, s, resolve.SegmenterOptions{})
		}}
	plan, err := req.Plan(ctx)
	if err != nil {
		fail(err)
	}
	defer plan.Segmenter.Close()
	acc, err := evaluate.Run(ctx, plan)
	if err != nil {
		fail(err)
	}
	if err := evaluate.WritePartial(ctx, "s3://my-bucket/eval/part-0.json", acc); err != nil {
		fail(err)
	}
	acc.Summary().WriteText(os.Stdout)
}
