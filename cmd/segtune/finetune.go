package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/finetune/regsettings"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/mpi"
	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/resolve"
	"github.com/segtune/segtune/runtime"
)

// finetuneFlags are what finetune's flags set: the run's configuration,
// bound field by field with the library's defaults, and the values the
// action turns into it (paths, text to parse, switches that invert).
type finetuneFlags struct {
	cfg                       finetune.Config
	reg                       regsettings.Settings
	valSplit                  datalayout.ValSplit
	data                      dataFolders
	layout                    dataLayout
	pre                       preprocessOptions
	valDense                  denseOptions
	session                   runtime.Options // --device, --threads
	model, out, maskPalette   string
	crop, cudaOpt, classNames string
	classes                   int
	momentum, weightDecay     float64
	resume, noFlip, asJSON    bool
	configPath                string // --config: flag values, or a run's config.json to repeat
}

// dataFolders are finetune's data flags: --data, or the four folders.
type dataFolders struct{ root, trainImages, trainMasks, valImages, valMasks string }

// urls reports whether any of the folders is in object storage.
func (d dataFolders) urls() bool {
	return slices.ContainsFunc([]string{d.root, d.trainImages, d.trainMasks, d.valImages, d.valMasks}, storage.IsURL)
}

func finetuneCommand() *cli.Command {
	f := &finetuneFlags{cfg: finetune.DefaultConfig()}
	cfg := &f.cfg
	return &cli.Command{
		Name:  "finetune",
		Usage: "fine-tune a segmentation model on a folder of labelled images",
		Description: "Starts from the base model's whole contract (its scale and value mapping; preprocessing flags\n" +
			"win), validates the base model first (epoch 0), compiles the model into a training graph, trains it\n" +
			"on ONNX Runtime with augmented batches, validates every epoch, ends saying whether the best epoch\n" +
			"beat the base, and writes, in --out: last.ckpt and best.ckpt\n" +
			"(atomic checkpoints), metrics.jsonl (per-step and per-epoch metrics), curves.png, tb/\n" +
			"(TensorBoard logs), samples.png (a contact sheet of the validation images with\n" +
			"the smallest and largest objects),\n" +
			"config.json and model.onnx (the best weights, exported, carrying the run's settings in its\n" +
			"metadata_props and in model.segtune.json: preprocessing, classes, palette, label map).\n" +
			"Ctrl-C saves a checkpoint and exits; --resume continues exactly where the run stopped. With --ema D,\n" +
			"validation, best.ckpt and model.onnx use an exponential moving average of the weights.\n" +
			"Validation runs each image whole, or, with --val-tile/--val-overlap/--val-tta, as segment's\n" +
			"--tile/--overlap/--tta do (blended scores); val mIoU, val loss, best.ckpt and --patience follow it.\n\n" +
			"Data: --data DIR in any known layout (images/{train,val} with masks/{train,val}, mmseg's\n" +
			"img_dir/ann_dir, Cityscapes, Pascal VOC, ADE20K, COCO JSON, CVAT, Label Studio and LabelMe exports,\n" +
			"nested folders; docs/data.md; --format names it, --split the\n" +
			"training split, default train; validation reads val where the layout has it), or explicit\n" +
			"--train-images/--train-masks/--val-images/--val-masks. Data without a val split (CVAT, Label Studio and\n" +
			"LabelMe exports) validates on --val-split F of its images, held out the same way every run (--split-seed,\n" +
			"--split-by folder|prefix keeps a video sequence's frames together) and listed in OUT/split.json.\n\n" +
			"Several processes (data-parallel, MPI): `mpirun -np P segtune-mpi finetune ...` (also srun\n" +
			"--mpi=pmix, Kubeflow's MPIJob; bin/segtune-mpi from `make build-mpi`). Every process trains on\n" +
			"--batch images of each step, so a step's global batch is P × --batch, drawn as one process with\n" +
			"--batch P×B would draw it; the gradients are summed with MPI_Allreduce and the size regularizer's\n" +
			"state is kept the same on every process. Rank 0 writes --out and validates; every process needs\n" +
			"the model and --data. --resume needs the same P. Without --threads, the processes on one\n" +
			"machine share its cores.",
		Flags: slices.Concat(f.dataFlags(), f.trainingFlags(), dataLayoutFlags(&f.layout, "--data"), valSplitFlags(&f.valSplit, "val-split", valSplitUsage), regularizerFlags(&f.reg),
			preprocessFlags(&f.pre), photometricFlags(&cfg.Augment.Photometric), geometricFlags(&cfg.Augment.Geometric), denseFlags(&f.valDense, "val-"),
			[]cli.Flag{configFlag("finetune", &f.configPath)}),
		Action: f.run,
	}
}

// dataFlags are finetune's model, data and label flags.
func (f *finetuneFlags) dataFlags() []cli.Flag {
	def, cfg := f.cfg, &f.cfg // the flags' defaults, and where they go
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "pretrained ONNX model (not needed with --resume)", Destination: &f.model},
		&cli.StringFlag{Name: "data", Usage: "labelled data folder in any known layout, e.g. images/{train,val} with masks/{train,val} (a path, or an s3://, gs:// or azblob:// URL, copied into the cache)", Destination: &f.data.root},
		&cli.StringFlag{Name: "train-images", Usage: "training images folder", Destination: &f.data.trainImages},
		&cli.StringFlag{Name: "train-masks", Usage: "training masks folder", Destination: &f.data.trainMasks},
		&cli.StringFlag{Name: "val-images", Usage: "validation images folder", Destination: &f.data.valImages},
		&cli.StringFlag{Name: "val-masks", Usage: "validation masks folder", Destination: &f.data.valMasks},
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "run folder (checkpoints, metrics, curves, model): new, empty, or an earlier run's; never the base model's or a data folder", Destination: &f.out},
		labelMapFlag(&cfg.LabelMap, `remap mask labels to classes, e.g. "9,10:1;11:255;*:0"`),
		maskPaletteFlag(&f.maskPalette),
		&cli.IntFlag{Name: "ignore", Value: def.Ignore, Usage: "mask label left out of the loss and scores", Destination: &cfg.Ignore},
		&cli.IntFlag{Name: "classes", Usage: "replace the final classifier with a fresh one of K classes", Destination: &f.classes},
		&cli.BoolFlag{Name: "dequantize", Usage: "train a quantized model (ConvInteger, QLinearConv, QDQ weights) with its integer weights turned into float ones (scale × (q − zero point)); the exported model is float (export --precision int8 quantizes it again)", Destination: &cfg.Network.Dequantize},
		classNamesFlag(&f.classNames, "comma-separated class names"),
		&cli.StringFlag{Name: "trainable", Value: def.Trainable, Usage: network.TrainableHelp, Destination: &cfg.Trainable},
		&cli.IntFlag{Name: "epochs", Value: def.Epochs, Usage: "epochs to train", Destination: &cfg.Epochs},
		&cli.Int64Flag{Name: "steps", Usage: "stop after this many steps (0: run all epochs)", Destination: &cfg.MaxSteps},
		&cli.IntFlag{Name: "batch", Value: def.Batch, Usage: "images per step; under mpirun or srun, per process: a step trains on processes × batch images", Destination: &cfg.Batch},
		&cli.IntFlag{Name: "accumulate", DefaultText: "1", Usage: "sum the gradients of `N` batches before each optimiser step: the update of a batch N × --batch in the memory of --batch (each batch's mean loss counts equally). --steps, --epochs, the schedule and its warm-up count optimiser steps, each of N batches. Host memory only (not with --resident on; auto keeps the state on the host), not with --alpha", Destination: &cfg.Accumulate},
		&cli.Float64Flag{Name: "ema", Usage: "keep an exponential moving average of the weights with decay `D` in (0, 1), e.g. 0.999 (about the last 1000 steps): validation, best.ckpt, --patience and the exported model.onnx use the averaged weights; checkpoints keep both and --resume continues the average exactly. With --resident on, the weights are read back every step", Destination: &cfg.EMA},
		&cli.StringFlag{Name: "sample-by", Usage: "`class`: draw each epoch's images by repeat factors (LVIS's), so that images holding rare classes come up more often: a class in a share f of the training images repeats its images √(t/f) times where f < t (--repeat-threshold); an epoch keeps its number of steps. Default: shuffled (or, with --balance, half small, half large objects)", Destination: &cfg.SampleBy},
		&cli.Float64Flag{Name: "repeat-threshold", Value: finetune.DefaultRepeatThreshold, Usage: "--sample-by class oversamples the classes found in fewer than this share `T` of the training images", Destination: &cfg.RepeatThreshold},
	}
}

// trainingFlags are finetune's training and execution flags.
func (f *finetuneFlags) trainingFlags() []cli.Flag {
	def, cfg := f.cfg, &f.cfg
	return []cli.Flag{
		&cli.StringFlag{Name: "crop", Value: fmt.Sprintf("%dx%d", def.Height, def.Width), Usage: "training crop HxW (the training graph's input size)", Destination: &f.crop},
		&cli.StringFlag{Name: "optimizer", Value: def.Optimizer, Usage: "adamw, adam or sgd (momentum 0.9). The defaults (AdamW, lr 1e-4, poly decay after a 10% warm-up) fine-tune a pretrained network without wrecking it: SGD at lr 0.01, the usual from-scratch setting, took a pretrained model from 0.62 to 0.53 mIoU in 40 steps (docs/models.md)", Destination: &cfg.Optimizer},
		&cli.Float64Flag{Name: "lr", Value: def.LR, Usage: "base learning rate (a fresh head from --classes learns faster with 1e-3)", Destination: &cfg.LR},
		&cli.Float64Flag{Name: "momentum", Usage: "SGD momentum", DefaultText: "0.9", Destination: &f.momentum},
		&cli.Float64Flag{Name: "weight-decay", Usage: "weight decay", DefaultText: "0; AdamW 0.01", Destination: &f.weightDecay},
		&cli.StringFlag{Name: "schedule", Value: def.Schedule, Usage: "constant, poly:P or cosine, optionally with ,warmup=N (steps) or ,warmup=P% (of the run)", Destination: &cfg.Schedule},
		&cli.Float64Flag{Name: "scale-min", Value: def.Augment.ScaleMin, Usage: "smallest random rescale of training images", Destination: &cfg.Augment.ScaleMin},
		&cli.Float64Flag{Name: "scale-max", Value: def.Augment.ScaleMax, Usage: "largest random rescale of training images", Destination: &cfg.Augment.ScaleMax},
		&cli.BoolFlag{Name: "no-flip", Usage: "no random horizontal flips", Destination: &f.noFlip},
		&cli.Uint64Flag{Name: "seed", Value: def.Seed, Usage: "seed for data order, augmentation and a new classifier", Destination: &cfg.Seed},
		&cli.StringFlag{Name: "class-weights", Usage: "per-class loss weights `SPEC`: auto (1/ln(1.02 + p), p each class's share of the training masks' pixels) or w0,w1,…", Destination: &cfg.ClassWeights},
		&cli.IntFlag{Name: "patience", Usage: "stop after `N` epochs in which --monitor did not improve (0: never)", Destination: &cfg.Patience},
		&cli.StringFlag{Name: "monitor", Value: def.Monitor, Usage: "what --patience and best.ckpt follow: val.miou (higher is better) or val.loss (validation cross entropy, lower is better)", Destination: &cfg.Monitor},
		&cli.BoolFlag{Name: "resume", Usage: "continue from OUT/last.ckpt", Destination: &f.resume},
		&cli.BoolFlag{Name: "skip-bad", Usage: "skip unreadable images and bad masks with a warning instead of stopping", Destination: &cfg.SkipBad},
		&cli.StringFlag{Name: "resident", Value: def.Resident, Usage: "where parameters, gradients and optimiser moments live: on (the device's memory: a step moves only the batch in and the loss out; the optimiser runs as a graph there), off (Go memory: every step copies all weights in and all gradients out), auto (on where the steps may run on a GPU and the run is one process)", Destination: &cfg.Resident},
		&cli.BoolFlag{Name: "cuda-graph", Usage: "capture the resident training and optimiser steps as CUDA graphs (one launch a step instead of one a node; the batch shape is fixed, an epoch's last partial batch dropped as always); off by default until a GPU run measures it; ignored with one line on the CPU, with --resident off, or where ONNX Runtime will not capture the graph (a node on the CPU)", Destination: &cfg.CUDAGraph},
		&cli.StringFlag{Name: "loss", Value: def.Loss, Usage: "training objective: ce (cross entropy: softmax, or per-channel sigmoid for sigmoid and one-channel heads), focal (focal loss, --focal-gamma), dice (soft Dice over the classes), lovasz (Lovász-softmax, a surrogate of 1 − IoU; softmax heads), or the sums ce+dice, ce+lovasz, focal+dice", Destination: &cfg.Loss},
		&cli.Float64Flag{Name: "focal-gamma", Value: def.FocalGamma, Usage: "the focal loss's focusing parameter γ: (1 − p_true)^γ scales each pixel's cross entropy (0 < γ ≤ 10)", Destination: &cfg.FocalGamma},
		&cli.StringFlag{Name: "conv-grad", Value: "none", Usage: "convolution classes whose backward pass runs on a GPU as one cuDNN backward-data and backward-filter call each (segtune's ConvGrad operator) instead of standard operators: none, all, or a list of dense, pointwise, depthwise, grouped; off until a GPU run measures which classes it speeds up (bench/gpu/README.md); not on the CPU", Destination: &cfg.ConvGrad},
		&cli.StringFlag{Name: "precision", Value: def.Precision, Usage: "fp32 (strict float32), tf32 (float32 with TF32 in cuDNN's and cuBLAS's kernels on GPUs that have it, as PyTorch does for convolutions; the same as fp32 on the CPU), fp16 (mixed precision: convolutions and matrix products in float16, float32 master weights, a dynamic loss scale whose value and skipped steps go to metrics.jsonl; meant for GPUs) or bf16 (the same in bfloat16, no loss scale; CUDA only: with --device auto and no GPU, float32)", Destination: &cfg.Precision},
		&cli.StringFlag{Name: "cuda-opt", Usage: "CUDA provider options `K=V,K=V` over the ones the run picks (use_tf32 by --precision; cudnn_conv_algo_search=HEURISTIC under fp16 and bf16, where cuDNN's exhaustive search re-ran every step)", Destination: &f.cudaOpt},
		deviceFlag(&f.session.Device), threadsFlag(&f.session.Threads), jsonFlag(&f.asJSON),
	}
}

func (f *finetuneFlags) run(c *cli.Context) error {
	if err := f.checkRanges(); err != nil {
		return err
	}
	w, err := joinRanks(c, f.session.Device)
	if err != nil {
		return err
	}
	return leaveRanks(w, f.rank(c, w))
}

// checkRanges refuses a number out of its library's range before any
// work, unset optional ones and the regularizer's included.
func (f *finetuneFlags) checkRanges() error {
	all := f.cfg
	all.Momentum, all.WeightDecay, all.Regularizer = &f.momentum, &f.weightDecay, &f.reg.Reg
	if err := all.CheckRanges(); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	return nil
}

// rank is the run of one rank (of one process without MPI).
func (f *finetuneFlags) rank(c *cli.Context, w *mpi.Comm) error {
	if err := w.Agree(loadRuntime(c, f.session.Device), false); err != nil {
		return err
	}
	// every rank checks the flags
	cfg, err := dataparallel.Configure(w, f.data.urls(), func() (finetune.Config, error) { return f.config(c) })
	if err != nil {
		return err
	}
	rankThreads(c, w, &cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var bar *progressui.Steps
	log := noticeWriter(c)
	hooks := finetune.Hooks{Log: log, Notice: func(n finetune.Notice) { fmt.Fprintln(log, n.Named(flagOf)) }}
	if w.Rank() == 0 { // rank 0 shows the run
		hooks.OnStep = func(s finetune.StepInfo) {
			if bar == nil {
				bar = progressui.NewSteps(s.TotalSteps, !f.asJSON && progressui.Shown(globals(c).Quiet))
			}
			bar.Update(s.Epoch, s.Epochs, s.Loss, s.ImagesPerSec, s.Step)
		}
		hooks.OnEpoch = func(e finetune.EpochInfo) {
			if bar != nil {
				bar.Clear()
			}
			if !f.asJSON {
				printEpoch(e)
			}
		}
		hooks.OnBase = hooks.OnEpoch // epoch 0: the base model
	}
	res, err := finetune.TrainParallel(ctx, w, cfg, f.out, f.resume, hooks)
	if bar != nil {
		bar.Clear()
	}
	if err != nil || w.Rank() != 0 {
		return err
	}
	reportSamples(c, res, f.session) // samples.png
	if f.asJSON {
		return printJSON(os.Stdout, res)
	}
	return res.WriteSummary(os.Stdout)
}

// config turns the bound flags into a run configuration, each setting
// checked before any work.
func (f *finetuneFlags) config(c *cli.Context) (finetune.Config, error) {
	given := givenKeys(c.LocalFlagNames(), finetune.RunSettings()) // before a recorded run's flags are set
	rec, err := recordedRun(c, f.configPath, given, f.resume)
	if err != nil {
		return finetune.Config{}, err
	}
	cfg := f.cfg
	cfg.Device, cfg.Threads = f.session.Device, f.session.Threads
	if err := cfg.CheckExecution(); err != nil { // how the run executes, first
		return cfg, err
	}
	if err := f.data.mirror(c); err != nil {
		return cfg, err
	}
	cfg.Explicit = given // a resumed run refuses changed settings
	if err := f.settings(c, &cfg); err != nil {
		return cfg, err
	}
	if f.model == "" {
		if !f.resume {
			return cfg, cli.Exit("--model is required (except with --resume)", 2)
		}
		return cfg, nil // the checkpoint supplies the rest
	}
	if err := f.modelConfig(c, &cfg); err != nil {
		return cfg, err
	}
	if rec != nil { // --config names an earlier run's config.json
		cfg = finetune.Repeat(*rec, cfg)
		cfg.Explicit = given
	}
	if err := finetune.CheckRunDir(f.out, cfg); err != nil {
		return cfg, cli.Exit(withFlagNames(err).Error(), 2)
	}
	return cfg, nil
}

// settings takes the flags that need more than binding into cfg and
// checks the run's settings.
func (f *finetuneFlags) settings(c *cli.Context, cfg *finetune.Config) (err error) {
	cfg.Augment.Flip = !f.noFlip
	if cfg.CUDAOptions, err = finetune.ParseCUDAOptions(f.cudaOpt); err != nil {
		return err
	}
	if err := finetune.CheckLength(cfg.Epochs, cfg.MaxSteps, cfg.LR); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	if err := finetune.CheckClassWeights(cfg.ClassWeights); err != nil {
		return cli.Exit("--class-weights: "+err.Error(), 2)
	}
	if cfg.ValDense, err = f.valDense.dense(); err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if err := f.reg.Apply(cfg); err != nil {
		return err
	}
	if cfg.SampleBy == "" {
		cfg.RepeatThreshold = 0 // not recorded for runs that do not use it
	}
	for _, err := range []error{finetune.CheckAccumulate(cfg.Accumulate, cfg.Resident, cfg.Regularizer),
		finetune.CheckEMA(cfg.EMA), finetune.CheckSampleBy(cfg.SampleBy, cfg.RepeatThreshold, cfg.Balanced)} {
		if err != nil {
			return cli.Exit(withFlagNames(err).Error(), 2)
		}
	}
	if c.IsSet("momentum") { // unset: the optimizer's own
		m := f.momentum
		cfg.Momentum = &m
	}
	if c.IsSet("weight-decay") {
		wd := f.weightDecay
		cfg.WeightDecay = &wd
	}
	if cfg.Height, cfg.Width, err = imageio.ParseSize(f.crop); err != nil {
		return fmt.Errorf("--crop: %w", err)
	}
	masks, _, err := readMasks(cfg.LabelMap, f.maskPalette) // --label-map is checked here, before any work
	cfg.MaskPalette, cfg.ClassNames = masks.Palette, splitNames(f.classNames)
	return err
}

// modelConfig sets the base model, a new classifier, the settings the
// model brings and the data.
func (f *finetuneFlags) modelConfig(c *cli.Context, cfg *finetune.Config) (err error) {
	if cfg.Network.BaseModel, err = filepath.Abs(f.model); err != nil {
		return err
	}
	if f.classes > 0 {
		cfg.Network.Classes, cfg.Network.HeadSeed = f.classes, cfg.Seed
	}
	if err := f.applyModelSettings(c, cfg); err != nil {
		return err
	}
	return f.dataSpecs(c, cfg)
}

// mirror copies the folders in object storage into the cache and points
// their flags there (remote_fetch.go).
func (d *dataFolders) mirror(c *cli.Context) error {
	for _, p := range []struct {
		flag string
		v    *string
	}{{"data", &d.root}, {"train-images", &d.trainImages}, {"train-masks", &d.trainMasks}, {"val-images", &d.valImages}, {"val-masks", &d.valMasks}} {
		if storage.IsURL(*p.v) {
			dir, err := mirrorFolder(c, p.flag, *p.v)
			if err != nil {
				return err
			}
			*p.v = dir
		}
	}
	return nil
}

// dataSpecs sets the training and validation data from --data (in any
// layout), or from the four folder flags, which win.
func (f *finetuneFlags) dataSpecs(c *cli.Context, cfg *finetune.Config) error {
	vs, err := valSplitSetting(c, f.valSplit, "val-split")
	if err != nil {
		return err
	}
	d := f.data
	folders := finetune.Folders{TrainImages: d.trainImages, TrainMasks: d.trainMasks, ValImages: d.valImages, ValMasks: d.valMasks}
	if err := folders.Check(vs); err != nil {
		return cli.Exit(withFlagNames(err).Error(), 2)
	}
	if d.root != "" {
		opt, err := f.layout.options()
		if err != nil {
			return err
		}
		if cfg.Train, cfg.Val, err = openFinetuneData(c, d.root, vs, opt, cfg.SkipBad, cfg.LabelMap, f.out); err != nil {
			return err
		}
	}
	folders.Apply(cfg, vs)
	if !cfg.Train.Given() && !f.resume { // a resumed run has its recorded data
		return cli.Exit("give --data DIR or --train-images and --train-masks", 2)
	}
	return nil
}

// applyModelSettings takes the preprocessing, output reading, label map,
// class names and palette the base model brings (registry,
// metadata_props, sidecar, flags) into cfg, the model's scale included,
// and says once where the run trains and where that comes from.
func (f *finetuneFlags) applyModelSettings(c *cli.Context, cfg *finetune.Config) error {
	settings, err := f.pre.modelSettings(c, f.model)
	if err != nil {
		return err
	}
	cfg.ApplyModelSettings(settings.Sidecar)
	notef(c, "segtune: fine-tuning at %s (%s)", cfg.OperatingPoint(), contractSource(c, settings, f.pre.names))
	return nil
}

// contractSource names where a run's preprocessing comes from
// (resolve.Settings.PreprocessSource): the preprocessing flags set, over
// the model's settings.
func contractSource(c *cli.Context, s resolve.Settings, preprocessFlags []string) string {
	var flags []string
	for _, name := range preprocessFlags {
		if c.IsSet(name) {
			flags = append(flags, "--"+name)
		}
	}
	return s.PreprocessSource(flags, flagOf)
}

func printEpoch(e finetune.EpochInfo) { fmt.Println(e) }
