package runsetup

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/mpi"
	"github.com/segtune/segtune/internal/setting"
)

// setup is a request being turned into a run's configuration.
type setup struct {
	Request
	set []string // Given, and the recorded run's inputs taken
}

// Configure is Config on every rank of w, which agree on the outcome so
// that every rank stops on one rank's bad setting (dataparallel.Configure:
// ranks mirroring bucket folders take turns); a rank then takes its share
// of the machine's cores where threads is not given.
func Configure(ctx context.Context, w *mpi.Comm, req Request) (finetune.Config, error) {
	cfg, err := dataparallel.Configure(w, req.Data.urls(), func() (finetune.Config, error) { return Config(ctx, req) })
	if err != nil {
		return cfg, err
	}
	threads, share := dataparallel.ThreadShare(w, slices.Contains(req.Given, "threads"))
	if share {
		cfg.Threads = threads
		cfg.Explicit = append(cfg.Explicit, "threads")
		req.notef("%d processes share this machine: {threads} %d each (set {threads} to choose)", w.LocalSize(), threads)
	}
	return cfg, nil
}

// Config is the run req asks for, each setting checked before any work.
func Config(ctx context.Context, req Request) (finetune.Config, error) {
	s := &setup{Request: req, set: slices.Clone(req.Given)}
	if err := s.repeatInputs(); err != nil {
		return finetune.Config{}, err
	}
	cfg := s.Config
	if err := cfg.CheckExecution(); err != nil { // how the run executes, first
		return cfg, err
	}
	if err := s.mirror(ctx); err != nil {
		return cfg, err
	}
	cfg.Explicit = s.Given // a resumed run refuses changed settings
	if err := s.settings(&cfg); err != nil {
		return cfg, err
	}
	if s.Model == "" {
		if !s.Resume {
			return cfg, setting.Usage(setting.Messagef("{network.base_model} is required (except with {resume})"))
		}
		return cfg, nil // the checkpoint supplies the rest
	}
	if err := s.model(&cfg); err != nil {
		return cfg, err
	}
	if err := s.data(&cfg); err != nil {
		return cfg, err
	}
	if s.Recorded != nil {
		cfg = finetune.Repeat(*s.Recorded, cfg)
		cfg.Explicit = s.Given
	}
	return cfg, setting.Usage(finetune.CheckRunDir(s.Out, cfg))
}

// repeatInputs takes the recorded run's inputs that the request does not
// give (finetune.Config.RepeatInputs), so that the request is a complete
// run; finetune.Repeat then keeps the recorded settings not given.
func (s *setup) repeatInputs() error {
	if s.Recorded == nil {
		return nil
	}
	inputs, err := s.Recorded.RepeatInputs(s.Given, s.Resume)
	if err != nil {
		return setting.Usage(setting.Messagef("{config} %s: %v", s.RecordedPath, err))
	}
	for key, v := range inputs {
		if err := s.input(key, v); err != nil {
			return err
		}
		s.set = append(s.set, key)
	}
	return nil
}

// input sets the request's input key to v, as RepeatInputs writes it.
func (s *setup) input(key, v string) (err error) {
	d, vs := &s.Data, &s.ValSplit
	text := map[string]*string{"network.base_model": &s.Model, "data": &d.Root, "format": &s.Layout.Format, "split": &s.Layout.Split,
		"train_images": &d.TrainImages, "train_masks": &d.TrainMasks, "val_images": &d.ValImages, "val_masks": &d.ValMasks, "split_by": &vs.By}
	switch key {
	case "val_split":
		vs.Fraction, err = strconv.ParseFloat(v, 64)
	case "split_seed":
		vs.Seed, err = strconv.ParseUint(v, 10, 64)
	default:
		p, ok := text[key]
		if !ok {
			return fmt.Errorf("a recorded run's input %s is not one of a request's", key)
		}
		*p = v
	}
	return err
}

// settings sets and checks the settings that need more than binding.
func (s *setup) settings(cfg *finetune.Config) (err error) {
	cfg.Augment.Flip = !s.NoFlip
	if cfg.CUDAOptions, err = finetune.ParseCUDAOptions(s.CUDAOptions); err != nil {
		return err
	}
	if err := finetune.CheckLength(cfg.Epochs, cfg.MaxSteps, cfg.LR); err != nil {
		return setting.Usage(err)
	}
	if err := finetune.CheckClassWeights(cfg.ClassWeights); err != nil {
		return setting.Usage(&setting.Error{Setting: "class_weights", Err: err})
	}
	val := s.ValDense
	val.Prefix = "val_" // keyed val_tile, val_overlap, val_tta
	if cfg.ValDense, err = val.Parse(); err != nil {
		return setting.Usage(err)
	}
	if err := s.Regularizer.Apply(cfg); err != nil {
		return err
	}
	if cfg.SampleBy == "" {
		cfg.RepeatThreshold = 0 // not recorded for runs that do not use it
	}
	for _, err := range []error{finetune.CheckAccumulate(cfg.Accumulate, cfg.Resident, cfg.Regularizer),
		finetune.CheckEMA(cfg.EMA), finetune.CheckSampleBy(cfg.SampleBy, cfg.RepeatThreshold, cfg.Balanced)} {
		if err != nil {
			return setting.Usage(err)
		}
	}
	return s.optimizerAndData(cfg)
}

// optimizerAndData sets the optimizer's settings given, the crop, and how
// masks are read (label map, palette, class names).
func (s *setup) optimizerAndData(cfg *finetune.Config) (err error) {
	if slices.Contains(s.Given, "momentum") { // not given: the optimizer's own
		m := s.Momentum
		cfg.Momentum = &m
	}
	if slices.Contains(s.Given, "weight_decay") {
		wd := s.WeightDecay
		cfg.WeightDecay = &wd
	}
	if cfg.Height, cfg.Width, err = imageio.ParseSize(s.Crop); err != nil {
		return setting.Messagef("{crop}: %w", err)
	}
	masks, _, err := datalayout.ReadMasks(cfg.LabelMap, s.MaskPalette) // the label map is checked here, before any work
	cfg.MaskPalette, cfg.ClassNames = masks.Palette, s.ClassNames
	return err
}

// model sets the base model, a new classifier and the settings the model
// brings (registry, metadata_props, sidecar, the request's layer), the
// model's scale included, and says where the run trains and where that
// comes from.
func (s *setup) model(cfg *finetune.Config) (err error) {
	if cfg.Network.BaseModel, err = filepath.Abs(s.Model); err != nil {
		return err
	}
	if s.Classes > 0 {
		cfg.Network.Classes, cfg.Network.HeadSeed = s.Classes, cfg.Seed
	}
	settings, err := s.Preprocessing.Settings(s.Model, s.notes(), s.warnings(), s.name)
	if err != nil {
		return err
	}
	cfg.ApplyModelSettings(settings.Sidecar)
	s.notef("fine-tuning at %s (%s)", cfg.OperatingPoint(), settings.PreprocessSource(s.Preprocessing.Given, s.name))
	return nil
}

// notef writes a note, its {keys} named as the user names them.
func (r *Request) notef(format string, args ...any) {
	fmt.Fprintln(r.notes(), "segtune: "+setting.Sprintf(r.name, format, args...))
}

func (r *Request) notes() io.Writer { return orDiscard(r.Notes) }

func (r *Request) warnings() io.Writer { return orDiscard(r.Warnings) }

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// name calls the setting key as the user does.
func (r *Request) name(key string) string {
	if r.Name == nil {
		return key
	}
	return r.Name(key)
}
