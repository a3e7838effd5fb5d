package finetune

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The short version of the CamVid person fine-tune: four images seen whole
// (scaled to 144x192) every step, so the loss must fall; the checkpoint
// exports to a model that matches the training graph.
func TestCamVidPersonShortRun(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := testassets.Require(t, "data", "camvid")
	dir := t.TempDir()
	spec := DataSpec{Images: filepath.Join(dir, "images"), Masks: filepath.Join(dir, "masks")}
	os.Mkdir(spec.Images, 0o755)
	os.Mkdir(spec.Masks, 0o755)
	for _, name := range []string{"0001TP_006720.png", "0006R0_f01800.png", "0016E5_00930.png", "0016E5_05550.png"} {
		for src, dst := range map[string]string{"images": spec.Images, "masks": spec.Masks} {
			if err := os.Symlink(filepath.Join(camvid, src, "train", name), filepath.Join(dst, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	cfg := Config{
		Network: NetworkSpec{BaseModel: model}, Train: spec, LabelMap: "9,10:1;11:255;*:0", Ignore: 255,
		Trainable: "all", Batch: 4, Height: 144, Width: 192, Epochs: 6,
		Optimizer: "sgd", LR: 0.03, Schedule: "constant", Seed: 1,
		Augment:    data.Augment{ScaleMin: 0.4, ScaleMax: 0.4},
		Preprocess: imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1},
	}
	out := filepath.Join(dir, "run")
	if _, err := Train(context.Background(), cfg, out, false, Hooks{}); err != nil {
		t.Fatal(err)
	}
	losses := epochLosses(t, out)
	t.Logf("losses %v", losses)
	if !(losses[len(losses)-1] < 0.85*losses[0]) {
		t.Fatalf("loss did not fall: %v", losses)
	}
	assertExportMatchesTraining(t, filepath.Join(out, "last.ckpt"), cfg)
}
