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
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime"
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
	data, err := os.ReadFile(modelPath)
	if err != nil {
		fail(err)
	}
	settings, _, err := imageio.LoadModelSidecar(modelPath)
	if err != nil || settings.Preprocess == nil {
		fail(fmt.Errorf("%s: no preprocessing settings (%v)", modelPath, err))
	}
	m, err := onnx.Parse(data, modelPath)
	if err != nil {
		fail(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		fail(err)
	}
	seg, err := inference.Open(data, ct, *settings.Preprocess, runtime.Options{})
	if err != nil {
		fail(err)
	}
	defer seg.Close()
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

	part := shard.Spec{Index: 0, Count: 4}
	plan := evaluate.Plan{Segmenter: seg, Shard: part, LabelMap: settings.LabelMap, Batch: 4}
	if plan.Pairs, plan.Total, err = evaluate.FolderPairs(ctx, imgs, masks, part); err != nil {
		fail(err)
	}
	plan.ReadFolders(ctx, imgs, masks)
	plan.Setup, err = evaluate.NewSetup(seg, *settings, evaluate.SetupOptions{
		Model: modelPath, Images: imgs.String(), Masks: masks.String(), SizeClasses: []int{1}})
	if err != nil {
		fail(err)
	}
	acc, err := evaluate.Run(ctx, plan)
	if err != nil {
		fail(err)
	}
	if err := evaluate.WritePartial(ctx, "s3://my-bucket/eval/part-0.json", acc); err != nil {
		fail(err)
	}
	acc.Summary().WriteText(os.Stdout)
}
