package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/dataparallel"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/mpi"
	progressui "github.com/segtune/segtune/internal/progress"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/resolve/runsetup"
	"github.com/segtune/segtune/runtime"
)

// finetuneFlags are what finetune's flags set: the run's request, bound
// field by field over the library's defaults, and the values the action
// adds to it.
type finetuneFlags struct {
	req        runsetup.Request
	layout     dataLayout
	pre        preprocessOptions
	valDense   denseOptions
	classNames string
	asJSON     bool
	configPath string // --config: flag values, or a run's config.json to repeat
}

func finetuneCommand() *cli.Command {
	f := &finetuneFlags{req: runsetup.Request{Config: finetune.DefaultConfig()}}
	cfg := &f.req.Config
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
		Flags: slices.Concat(f.dataFlags(), f.trainingFlags(), dataLayoutFlags(&f.layout, "--data"), valSplitFlags(&f.req.ValSplit, "val-split", valSplitUsage), regularizerFlags(&f.req.Regularizer),
			preprocessFlags(&f.pre), photometricFlags(&cfg.Augment.Photometric), geometricFlags(&cfg.Augment.Geometric), denseFlags(&f.valDense, "val-"),
			[]cli.Flag{configFlag("finetune", &f.configPath)}),
		Action: f.run,
	}
}

// dataFlags are finetune's model, data and label flags.
func (f *finetuneFlags) dataFlags() []cli.Flag {
	r, def, cfg := &f.req, f.req.Config, &f.req.Config // where the flags go, and their defaults
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Usage: "pretrained ONNX model (not needed with --resume)", Destination: &r.Model},
		&cli.StringFlag{Name: "data", Usage: "labelled data folder in any known layout, e.g. images/{train,val} with masks/{train,val} (a path, or an s3://, gs:// or azblob:// URL, copied into the cache)", Destination: &r.Data.Root},
		&cli.StringFlag{Name: "train-images", Usage: "training images folder", Destination: &r.Data.TrainImages},
		&cli.StringFlag{Name: "train-masks", Usage: "training masks folder", Destination: &r.Data.TrainMasks},
		&cli.StringFlag{Name: "val-images", Usage: "validation images folder", Destination: &r.Data.ValImages},
		&cli.StringFlag{Name: "val-masks", Usage: "validation masks folder", Destination: &r.Data.ValMasks},
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Required: true, Usage: "run folder (checkpoints, metrics, curves, model): new, empty, or an earlier run's; never the base model's or a data folder", Destination: &r.Out},
		labelMapFlag(&cfg.LabelMap, `remap mask labels to classes, e.g. "9,10:1;11:255;*:0"`),
		maskPaletteFlag(&r.MaskPalette),
		&cli.IntFlag{Name: "ignore", Value: def.Ignore, Usage: "mask label left out of the loss and scores", Destination: &cfg.Ignore},
		&cli.IntFlag{Name: "classes", Usage: "replace the final classifier with a fresh one of K classes", Destination: &r.Classes},
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
	r, def, cfg := &f.req, f.req.Config, &f.req.Config
	return []cli.Flag{
		&cli.StringFlag{Name: "crop", Value: fmt.Sprintf("%dx%d", def.Height, def.Width), Usage: "training crop HxW (the training graph's input size)", Destination: &r.Crop},
		&cli.StringFlag{Name: "optimizer", Value: def.Optimizer, Usage: "adamw, adam or sgd (momentum 0.9). The defaults (AdamW, lr 1e-4, poly decay after a 10% warm-up) fine-tune a pretrained network without wrecking it: SGD at lr 0.01, the usual from-scratch setting, took a pretrained model from 0.62 to 0.53 mIoU in 40 steps (docs/models.md)", Destination: &cfg.Optimizer},
		&cli.Float64Flag{Name: "lr", Value: def.LR, Usage: "base learning rate (a fresh head from --classes learns faster with 1e-3)", Destination: &cfg.LR},
		&cli.Float64Flag{Name: "momentum", Usage: "SGD momentum", DefaultText: "0.9", Destination: &r.Momentum},
		&cli.Float64Flag{Name: "weight-decay", Usage: "weight decay", DefaultText: "0; AdamW 0.01", Destination: &r.WeightDecay},
		&cli.StringFlag{Name: "schedule", Value: def.Schedule, Usage: "constant, poly:P or cosine, optionally with ,warmup=N (steps) or ,warmup=P% (of the run)", Destination: &cfg.Schedule},
		&cli.Float64Flag{Name: "scale-min", Value: def.Augment.ScaleMin, Usage: "smallest random rescale of training images", Destination: &cfg.Augment.ScaleMin},
		&cli.Float64Flag{Name: "scale-max", Value: def.Augment.ScaleMax, Usage: "largest random rescale of training images", Destination: &cfg.Augment.ScaleMax},
		&cli.BoolFlag{Name: "no-flip", Usage: "no random horizontal flips", Destination: &r.NoFlip},
		&cli.Uint64Flag{Name: "seed", Value: def.Seed, Usage: "seed for data order, augmentation and a new classifier", Destination: &cfg.Seed},
		&cli.StringFlag{Name: "class-weights", Usage: "per-class loss weights `SPEC`: auto (1/ln(1.02 + p), p each class's share of the training masks' pixels) or w0,w1,…", Destination: &cfg.ClassWeights},
		&cli.IntFlag{Name: "patience", Usage: "stop after `N` epochs in which --monitor did not improve (0: never)", Destination: &cfg.Patience},
		&cli.StringFlag{Name: "monitor", Value: def.Monitor, Usage: "what --patience and best.ckpt follow: val.miou (higher is better) or val.loss (validation cross entropy, lower is better)", Destination: &cfg.Monitor},
		&cli.BoolFlag{Name: "resume", Usage: "continue from OUT/last.ckpt", Destination: &r.Resume},
		&cli.BoolFlag{Name: "skip-bad", Usage: "skip unreadable images and bad masks with a warning instead of stopping", Destination: &cfg.SkipBad},
		&cli.StringFlag{Name: "resident", Value: def.Resident, Usage: "where parameters, gradients and optimiser moments live: on (the device's memory: a step moves only the batch in and the loss out; the optimiser runs as a graph there), off (Go memory: every step copies all weights in and all gradients out), auto (on where the steps may run on a GPU and the run is one process)", Destination: &cfg.Resident},
		&cli.BoolFlag{Name: "cuda-graph", Usage: "capture the resident training and optimiser steps as CUDA graphs (one launch a step instead of one a node; the batch shape is fixed, an epoch's last partial batch dropped as always); off by default until a GPU run measures it; ignored with one line on the CPU, with --resident off, or where ONNX Runtime will not capture the graph (a node on the CPU)", Destination: &cfg.CUDAGraph},
		&cli.StringFlag{Name: "loss", Value: def.Loss, Usage: "training objective: ce (cross entropy: softmax, or per-channel sigmoid for sigmoid and one-channel heads), focal (focal loss, --focal-gamma), dice (soft Dice over the classes), lovasz (Lovász-softmax, a surrogate of 1 − IoU; softmax heads), or the sums ce+dice, ce+lovasz, focal+dice", Destination: &cfg.Loss},
		&cli.Float64Flag{Name: "focal-gamma", Value: def.FocalGamma, Usage: "the focal loss's focusing parameter γ: (1 − p_true)^γ scales each pixel's cross entropy (0 < γ ≤ 10)", Destination: &cfg.FocalGamma},
		&cli.StringFlag{Name: "conv-grad", Value: "none", Usage: "convolution classes whose backward pass runs on a GPU as one cuDNN backward-data and backward-filter call each (segtune's ConvGrad operator) instead of standard operators: none, all, or a list of dense, pointwise, depthwise, grouped; off until a GPU run measures which classes it speeds up (bench/gpu/README.md); not on the CPU", Destination: &cfg.ConvGrad},
		&cli.StringFlag{Name: "precision", Value: def.Precision, Usage: "fp32 (strict float32), tf32 (float32 with TF32 in cuDNN's and cuBLAS's kernels on GPUs that have it, as PyTorch does for convolutions; the same as fp32 on the CPU), fp16 (mixed precision: convolutions and matrix products in float16, float32 master weights, a dynamic loss scale whose value and skipped steps go to metrics.jsonl; meant for GPUs) or bf16 (the same in bfloat16, no loss scale; CUDA only: with --device auto and no GPU, float32)", Destination: &cfg.Precision},
		&cli.StringFlag{Name: "cuda-opt", Usage: "CUDA provider options `K=V,K=V` over the ones the run picks (use_tf32 by --precision; cudnn_conv_algo_search=HEURISTIC under fp16 and bf16, where cuDNN's exhaustive search re-ran every step)", Destination: &r.CUDAOptions},
		deviceFlag(&cfg.Device), threadsFlag(&cfg.Threads), jsonFlag(&f.asJSON),
	}
}

func (f *finetuneFlags) run(c *cli.Context) error {
	all := f.req.Config // every number in its library's range before any work, unset optional ones included
	all.Momentum, all.WeightDecay, all.Regularizer = &f.req.Momentum, &f.req.WeightDecay, &f.req.Regularizer.Reg
	if err := all.CheckRanges(); err != nil {
		return setting.Usage(err)
	}
	w, err := joinRanks(c, all.Device)
	if err != nil {
		return err
	}
	return leaveRanks(w, f.rank(c, w))
}

// request is the run the flags ask for, with what the command line gave.
func (f *finetuneFlags) request(c *cli.Context) (runsetup.Request, error) {
	r := f.req
	r.Layout = datalayout.Layout{Format: f.layout.Format, Split: f.layout.Split, Crowd: f.layout.Crowd}
	r.ClassNames, r.Preprocessing = splitNames(f.classNames), f.pre.Preprocessing
	r.Preprocessing.Given = f.pre.set(c)
	r.ValDense = f.valDense.DenseRequest
	r.Given = givenKeys(c.LocalFlagNames(), finetune.RunSettings())
	r.Notes, r.Warnings, r.Name, r.RecordedPath = noticeWriter(c), os.Stderr, flagOf, f.configPath
	var err error
	r.Recorded, err = recordedRun(f.configPath)
	return r, err
}

// rank is the run of one rank (of one process without MPI).
func (f *finetuneFlags) rank(c *cli.Context, w *mpi.Comm) error {
	if err := w.Agree(loadRuntime(c, f.req.Config.Device), false); err != nil {
		return err
	}
	req, err := f.request(c)
	if err := w.Agree(err, false); err != nil {
		return err
	}
	cfg, err := runsetup.Configure(c.Context, w, req) // every rank checks the settings
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hooks, clearBar := f.hooks(c, w)
	res, err := finetune.TrainParallel(ctx, w, cfg, req.Out, req.Resume, hooks)
	clearBar()
	if err != nil || w.Rank() != 0 {
		return err
	}
	runsetup.ReportSamples(req.Notes, res, runtime.Options{Device: req.Config.Device, Threads: req.Config.Threads}) // samples.png
	if f.asJSON {
		return printJSON(os.Stdout, res)
	}
	return res.WriteSummary(os.Stdout)
}

// hooks show the run: notices on every rank, progress and epochs on rank
// 0; clearBar takes the progress bar away.
func (f *finetuneFlags) hooks(c *cli.Context, w *mpi.Comm) (hooks finetune.Hooks, clearBar func()) {
	log := noticeWriter(c)
	hooks = finetune.Hooks{Log: log, Notice: func(n finetune.Notice) { fmt.Fprintln(log, n.Named(flagOf)) }}
	var bar *progressui.Steps
	clearBar = func() {
		if bar != nil {
			bar.Clear()
		}
	}
	if w.Rank() != 0 {
		return hooks, clearBar
	}
	hooks.OnStep = func(s finetune.StepInfo) {
		if bar == nil {
			bar = progressui.NewSteps(s.TotalSteps, !f.asJSON && progressui.Shown(globals(c).Quiet))
		}
		bar.Update(s.Epoch, s.Epochs, s.Loss, s.ImagesPerSec, s.Step)
	}
	hooks.OnEpoch = func(e finetune.EpochInfo) {
		clearBar()
		if !f.asJSON {
			printEpoch(e)
		}
	}
	hooks.OnBase = hooks.OnEpoch // epoch 0: the base model
	return hooks, clearBar
}

func printEpoch(e finetune.EpochInfo) { fmt.Println(e) }

// joinRanks joins the MPI world a launcher started this process in (alone
// without one). Ranks other than 0 go quiet: rank 0 prints the run.
func joinRanks(c *cli.Context, device string) (*mpi.Comm, error) {
	w, err := mpi.Init()
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	if w.Rank() != 0 {
		if err := c.Set("quiet", "true"); err != nil {
			return w, err
		}
	}
	w.PinGPU(device == "cpu")
	return w, nil
}

// leaveRanks ends this rank's part in the job with err, the outcome of its
// run (dataparallel.Leave).
func leaveRanks(w *mpi.Comm, err error) error {
	return dataparallel.Leave(w, err, errors.Is(err, finetune.ErrInterrupted), os.Stderr, withFlagNames)
}
