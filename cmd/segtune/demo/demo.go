package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
)

// TableHeader is the header of the demo's table; Finetune returns a row.
var TableHeader = []string{"run", "val mIoU", "small", "large", "gap", "size F1", "s/epoch", "projections"}

// Data is the demo's data: a new draw of the synthetic world (another
// seed, more camouflage and noise) with train and val images, harder than
// the one the built-in model was pretrained on.
func Data(train, val int) synth.Config {
	sc := synth.DefaultConfig()
	sc.Seed, sc.Train, sc.Val, sc.Camouflage, sc.Noise = 7, train, val, 0.3, 12
	return sc
}

// WriteModel writes the built-in pretrained model and its sidecar into
// out and returns its registry entry and path.
func WriteModel(out string) (models.Entry, string, error) {
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		return entry, "", err
	}
	modelPath := filepath.Join(out, entry.File)
	if err := atomicfile.Write(modelPath, models.SynthModel, 0o644); err != nil {
		return entry, "", err
	}
	side := entry.Sidecar()
	return entry, modelPath, side.Save(imageio.SidecarPath(modelPath))
}

// Config is the demo's baseline fine-tune: the built-in model at
// modelPath (entry) on the synthetic data of dataDir, drawn with sc, for
// epochs epochs on threads threads (0: ONNX Runtime's default). The
// regularised run is the same with finetune.DefaultRegularizer added.
func Config(modelPath, dataDir string, sc synth.Config, entry models.Entry, epochs, threads int) finetune.Config {
	abs, _ := filepath.Abs(modelPath)
	base := finetune.Config{
		Network: finetune.NetworkSpec{BaseModel: abs},
		Train:   finetune.DataSpec{Images: filepath.Join(dataDir, "images", "train"), Masks: filepath.Join(dataDir, "masks", "train")},
		Val:     finetune.DataSpec{Images: filepath.Join(dataDir, "images", "val"), Masks: filepath.Join(dataDir, "masks", "val")},
		Ignore:  255, ClassNames: synth.ClassNames, Trainable: "all",
		Batch: 8, Height: sc.Height, Width: sc.Width, Epochs: epochs,
		Optimizer: "adam", LR: 1e-3, Schedule: "poly:0.9", Seed: 1,
		Augment:    data.Augment{ScaleMin: 0.75, ScaleMax: 1.25, Flip: true},
		Preprocess: entry.Preprocess, Threads: threads,
		// Both runs draw balanced batches of whole images, as finetune
		// --alpha does, so that they differ only in the regularizer.
		Balanced: true,
	}
	base.Augment.WholeFrame = true
	return base
}

// Run is one of the demo's fine-tunes.
type Run struct {
	Name   string
	Config finetune.Config
}

// Runs are the demo's two fine-tunes: base, and base with the default
// regularizer of weight alpha.
func Runs(base finetune.Config, alpha float64) []Run {
	reg := base
	reg.Regularizer = finetune.DefaultRegularizer(alpha)
	return []Run{{"baseline", base}, {fmt.Sprintf("F1 α=%g", alpha), reg}}
}

// Finetune runs one of the demo's fine-tunes into dir (afresh), calling
// onEpoch after each epoch, and returns its history and its row of the
// demo's table (TableHeader).
func Finetune(ctx context.Context, name string, cfg finetune.Config, dir string, onEpoch func(finetune.EpochInfo)) (history.Run, []string, error) {
	os.RemoveAll(dir) // a demo starts afresh
	var last finetune.EpochInfo
	_, err := finetune.Train(ctx, cfg, dir, false, finetune.Hooks{OnEpoch: func(e finetune.EpochInfo) {
		last = e
		onEpoch(e)
	}})
	if err != nil {
		return history.Run{}, nil, err
	}
	recs, err := history.Read(filepath.Join(dir, finetune.HistoryFile))
	if err != nil {
		return history.Run{}, nil, err
	}
	epochs := history.Filter(recs, history.KindEpoch)
	if len(epochs) == 0 {
		return history.Run{}, nil, fmt.Errorf("%s: no epoch recorded", filepath.Join(dir, finetune.HistoryFile))
	}
	return history.Run{Name: name, Records: recs}, tableRow(name, last, epochs), nil
}

// tableRow summarises a run's epochs: the last epoch's scores, the mean
// seconds per epoch and the projections made; epochs is not empty.
func tableRow(name string, last finetune.EpochInfo, epochs []history.Record) []string {
	e := epochs[len(epochs)-1]
	var secs, proj float64
	for _, x := range epochs {
		secs += x.Seconds
		if p, ok := x.Value("reg_projections"); ok {
			proj += p
		}
	}
	val := func(k string) string {
		if v, ok := e.Value(k); ok {
			return fmt.Sprintf("%.4f", v)
		}
		return "—"
	}
	miou := "—"
	if last.Val != nil && last.Val.MeanIoU != nil {
		miou = fmt.Sprintf("%.4f", *last.Val.MeanIoU)
	}
	return []string{name, miou, val("val_miou_small"), val("val_miou_large"),
		val("val_miou_gap"), val("size_f1_val"), fmt.Sprintf("%.1f", secs/float64(len(epochs))), fmt.Sprintf("%.0f", proj)}
}
