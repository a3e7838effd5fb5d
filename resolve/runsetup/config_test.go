package runsetup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/regsettings"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models"
)

// request is a complete run on folders of images and masks, its notes
// in notes and its settings named --key.
func request(t *testing.T, notes io.Writer) Request {
	t.Helper()
	dir := t.TempDir()
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	for _, d := range []string{imgs, masks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{Config: finetune.DefaultConfig(), Model: filepath.Join(dir, "base.onnx"), Crop: "32x32", Out: filepath.Join(dir, "run"),
		Notes: notes, Name: func(key string) string { return "--" + key }}
	req.Config.Device = "cpu"
	d := finetune.DefaultRegularizer(0)
	req.Regularizer = regsettings.Settings{Reg: *d, Normalization: string(d.Dual.Normalization), Feasibility: string(d.Dual.Feasibility), View: "auto"}
	req.Data.TrainImages, req.Data.TrainMasks = imgs, masks
	return req
}

func TestConfigOfAWholeRequest(t *testing.T) {
	var notes bytes.Buffer
	req := request(t, &notes)
	req.Classes, req.NoFlip, req.CUDAOptions, req.ClassNames = 3, true, "a=b", []string{"bg", "x", "y"}
	req.Momentum, req.Given = 0.5, []string{"momentum"}
	cfg, err := Config(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Height != 32 || cfg.Width != 32 || cfg.Augment.Flip || cfg.CUDAOptions["a"] != "b" || cfg.Network.Classes != 3 ||
		cfg.Network.HeadSeed != cfg.Seed || cfg.Momentum == nil || *cfg.Momentum != 0.5 || cfg.WeightDecay != nil ||
		cfg.Train.Images != req.Data.TrainImages || !slices.Equal(cfg.ClassNames, req.ClassNames) || !slices.Equal(cfg.Explicit, req.Given) {
		t.Errorf("config %+v", cfg)
	}
	if !filepath.IsAbs(cfg.Network.BaseModel) || !strings.Contains(notes.String(), "segtune: fine-tuning at ") {
		t.Errorf("base model %q, notes %q", cfg.Network.BaseModel, notes.String())
	}
}

// Each refused value is an error of its setting, by key, and a usage
// error (status 2) where it is one before any work.
func TestConfigRefusesByKey(t *testing.T) {
	overlap := 0.5
	for _, c := range []struct {
		name  string
		edit  func(*Request)
		key   string
		usage bool
		msg   string
	}{
		{"ema", func(r *Request) { r.Config.EMA = -1 }, "ema", true, "--ema -1: the decay"},
		{"val tile", func(r *Request) { r.ValDense.Tile = "12xq" }, "val_tile", true, "--val_tile: "},
		{"val overlap", func(r *Request) { r.ValDense.Overlap, r.ValDense.OverlapGiven = overlap, true }, "val_overlap", true, "--val_overlap: needs --val_tile"},
		{"cuda options", func(r *Request) { r.CUDAOptions = "x" }, "cuda_options", false, `--cuda_options "x": "x" is not K=V`},
		{"class weights", func(r *Request) { r.Config.ClassWeights = "x" }, "class_weights", true, "--class_weights: class weights: "},
		{"label map", func(r *Request) { r.Config.LabelMap = "1:x" }, "label_map", true, "--label_map: "},
		{"length", func(r *Request) { r.Config.Epochs, r.Config.MaxSteps = 0, 0 }, "epochs", true, "--epochs 0: needs --max_steps"},
	} {
		req := request(t, nil)
		c.edit(&req)
		_, err := Config(context.Background(), req)
		var se *setting.Error
		if !errors.As(err, &se) || se.Setting != c.key {
			t.Errorf("%s: %v, want a *setting.Error of %s", c.name, err, c.key)
			continue
		}
		if got := setting.Rename(err, req.Name).Error(); !strings.HasPrefix(got, c.msg) {
			t.Errorf("%s: %q, want it to start %q", c.name, got, c.msg)
		}
		if want := map[bool]int{true: 2, false: 1}[c.usage]; setting.ExitCode(err) != want {
			t.Errorf("%s: status %d, want %d", c.name, setting.ExitCode(err), want)
		}
	}
}

// The messages that name several settings name them by key, for the
// caller to call them as its user does.
func TestConfigMessagesNameTheirSettings(t *testing.T) {
	for _, c := range []struct {
		edit func(*Request)
		want string
	}{
		{func(r *Request) { r.Model = "" }, "--network.base_model is required (except with --resume)"},
		{func(r *Request) { r.Data = Data{} }, "give --data DIR or --train_images and --train_masks"},
		{func(r *Request) { r.Data.TrainMasks = "" }, "--train_images and --train_masks go together"},
		{func(r *Request) { r.Given = []string{"split_by"} }, "--split_by goes with --val_split F"},
		{func(r *Request) { r.Crop = "12xq" }, "--crop: size \"12xq\""},
	} {
		req := request(t, nil)
		c.edit(&req)
		_, err := Config(context.Background(), req)
		if err == nil || !strings.HasPrefix(setting.Rename(err, req.Name).Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

// A recorded run is repeated: its model and data where the request gives
// none (the held-out val split too), its settings where the request gives
// none, the request's where it does; the run keeps the keys given, for
// resuming to refuse changed ones. A recorded path that names nothing is
// refused, naming the file and the key.
func TestConfigRepeatsARecordedRun(t *testing.T) {
	req := request(t, nil)
	rec := req.Config
	rec.Network.BaseModel, rec.Epochs, rec.LR = req.Model, 7, 0.5
	if err := os.WriteFile(req.Model, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	rec.Train = finetune.DataSpec{Images: req.Data.TrainImages, Masks: req.Data.TrainMasks, ValSplit: &datalayout.ValSplit{Fraction: 0.25, Seed: 3, By: "image"}}
	rec.Val, rec.Val.HeldOut = rec.Train, true
	req.Model, req.Data = "", Data{}
	req.Recorded, req.RecordedPath, req.Given, req.Config.LR = &rec, "run/config.json", []string{"lr"}, 0.01
	cfg, err := Config(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Epochs != 7 || cfg.LR != 0.01 || cfg.Train.Images != rec.Train.Images || !cfg.Val.HeldOut ||
		cfg.Train.ValSplit == nil || *cfg.Train.ValSplit != *rec.Train.ValSplit || !slices.Equal(cfg.Explicit, []string{"lr"}) {
		t.Errorf("repeated: %+v", cfg)
	}
	rec.Train.Masks = filepath.Join(t.TempDir(), "nosuch")
	_, err = Config(context.Background(), req)
	if got := setting.Rename(err, req.Name).Error(); setting.ExitCode(err) != 2 || !strings.HasPrefix(got, "--config run/config.json: train.masks ") {
		t.Errorf("a recorded path naming nothing: %q (status %d)", got, setting.ExitCode(err))
	}
}

// Resuming needs no model: the checkpoint has it.
func TestConfigResumesWithoutAModel(t *testing.T) {
	req := request(t, nil)
	req.Model, req.Resume = "", true
	if _, err := Config(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

// A fraction held out for validation is taken where it is given, and
// refused by key where it is no fraction.
func TestConfigHoldsOutTheValSplitGiven(t *testing.T) {
	req := request(t, nil)
	req.Given, req.ValSplit = []string{"val_split"}, datalayout.ValSplit{Fraction: 0.25, By: "image"}
	cfg, err := Config(context.Background(), req)
	if err != nil || cfg.Train.ValSplit == nil || cfg.Train.ValSplit.Fraction != 0.25 || !cfg.Val.HeldOut {
		t.Errorf("%v: train %+v val %+v", err, cfg.Train, cfg.Val)
	}
	req.ValSplit.Fraction = 1.5
	_, err = Config(context.Background(), req)
	if got := setting.Rename(err, req.Name).Error(); setting.ExitCode(err) != 2 || !strings.HasPrefix(got, "--val_split 1.5: ") {
		t.Errorf("fraction 1.5: %q (status %d)", got, setting.ExitCode(err))
	}
}

// Ranks on one machine share its cores where threads is not given, and
// say so; given threads stand.
func TestConfigureSharesTheCores(t *testing.T) {
	for _, given := range []bool{false, true} {
		w := mpi.Local(2)
		cfgs, notes := make([]finetune.Config, 2), make([]bytes.Buffer, 2)
		var wg sync.WaitGroup
		for r := range w {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := request(t, &notes[r])
				if given {
					req.Given, req.Config.Threads = []string{"threads"}, 3
				}
				var err error
				if cfgs[r], err = Configure(context.Background(), w[r], req); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		shared := cfgs[0].Threads > 0 && slices.Contains(cfgs[0].Explicit, "threads") &&
			strings.Contains(notes[1].String(), "segtune: 2 processes share this machine: --threads ")
		if given && (shared || cfgs[1].Threads != 3) || !given && !shared {
			t.Errorf("threads given %v: threads %d, explicit %v, notes %q", given, cfgs[0].Threads, cfgs[0].Explicit, notes[1].String())
		}
	}
}
