// Command regstep measures the per-step cost of the size regularizer
// (α > 0, Algorithm 1's once-per-epoch projection) over the baseline step on
// the CamVid person fine-tune: the same model, data, crop and batch, run
// alternately with and without the regularizer; medians of the per-step
// times in metrics.jsonl (the first steps of each run are warm-up).
//
//	go run ./bench/regstep -steps 12 -rounds 2
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"

	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime"
)

func main() {
	steps := flag.Int64("steps", 12, "steps per run")
	warm := flag.Int("warmup", 2, "steps of each run left out")
	rounds := flag.Int("rounds", 2, "baseline/regularised pairs")
	crop := flag.Int("crop", 240, "crop height (width 4/3 of it)")
	batch := flag.Int("batch", 4, "batch size")
	flag.Parse()
	assets := testassets.SharedAssetsDir()
	if assets == "" {
		log.Fatal("needs the shared assets (the person model and CamVid)")
	}
	if err := runtime.Init(""); err != nil {
		log.Fatal(err)
	}
	camvid := filepath.Join(assets, "data", "camvid")
	base := finetune.Config{
		Network:  finetune.NetworkSpec{BaseModel: filepath.Join(assets, "models", "deeplabv3plus_person_dynamic.onnx")},
		Train:    finetune.DataSpec{Images: filepath.Join(camvid, "images", "train"), Masks: filepath.Join(camvid, "masks", "train")},
		LabelMap: "9,10:1;11:255;*:0", Ignore: 255, Trainable: "all",
		Batch: *batch, Height: *crop, Width: *crop * 4 / 3, MaxSteps: *steps, Epochs: 1,
		Optimizer: "adamw", LR: 2e-4, Schedule: "constant", Seed: 1,
		Augment:    data.Augment{ScaleMin: 0.75, ScaleMax: 1.5, Flip: true},
		Preprocess: imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1},
		Balanced:   true, // both runs sample alike; they differ only in the regularizer
	}
	reg := base
	reg.Regularizer = &finetune.RegularizerConfig{Alpha: 1e-3, Projection: "epoch",
		Dual: dual.Config{Normalization: dual.NormMean}}
	tmp, err := os.MkdirTemp("", "regstep")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	var tb, tr []float64
	for r := 0; r < *rounds; r++ {
		tb = append(tb, run(base, filepath.Join(tmp, fmt.Sprint("base", r)), *warm)...)
		tr = append(tr, run(reg, filepath.Join(tmp, fmt.Sprint("reg", r)), *warm)...)
	}
	mb, mr := median(tb), median(tr)
	fmt.Printf("person model, batch %d, crop %dx%d, %d timed steps each\n", *batch, base.Height, base.Width, len(tb))
	fmt.Printf("baseline step      %7.3f s\n", mb)
	fmt.Printf("regularised step   %7.3f s  (alpha 1e-3, projection once per epoch)\n", mr)
	fmt.Printf("overhead           %+6.1f %%\n", 100*(mr/mb-1))
}

func run(cfg finetune.Config, dir string, warm int) []float64 {
	if _, err := finetune.Train(context.Background(), cfg, dir, false, finetune.Hooks{}); err != nil {
		log.Fatal(err)
	}
	recs, err := history.Read(filepath.Join(dir, finetune.HistoryFile))
	if err != nil {
		log.Fatal(err)
	}
	var out []float64
	for i, r := range history.Filter(recs, history.KindStep) {
		if i >= warm {
			out = append(out, r.Seconds)
		}
	}
	return out
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}
