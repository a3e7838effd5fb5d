package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// The libraries name a setting by its field; the user reads the flag that
// set it, with the library's reason, and the typed error stays reachable.
func TestLibraryErrorsNameTheFlag(t *testing.T) {
	isolateModelSearch(t)
	out := filepath.Join(t.TempDir(), "run")
	for _, c := range []struct{ flag, value, want string }{
		{"--precision", "fp8", "--precision fp8: want fp32, tf32, fp16 or bf16"},
		{"--resident", "maybe", "--resident maybe: want auto, on or off"},
	} {
		_, err := runCLI(t, "finetune", "--model", "segtune-synth", "--data", t.TempDir(), "--out", out, c.flag, c.value)
		var se *setting.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &se) {
			t.Errorf("finetune %s %s: %v; want %q", c.flag, c.value, err, c.want)
		}
		if strings.Contains(err.Error(), "Precision") || strings.Contains(err.Error(), "Resident") {
			t.Errorf("finetune %s %s: the error names the Config field: %v", c.flag, c.value, err)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused run wrote %s", out)
	}
}

func TestKeepFloatErrorNamesTheFlag(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	out := filepath.Join(dir, "m16.onnx")
	_, err := runCLI(t, "export", "--model", model, "--out", out, "--precision", "fp16",
		"--check-images", filepath.Join(data, "images", "val"), "--keep-float", "Conv,Sotfmax")
	var ke *quantize.UnmatchedKeepError
	want := "--keep-float names Sotfmax, which no node of the model has"
	if err == nil || !strings.Contains(err.Error(), want) || !errors.As(err, &ke) {
		t.Errorf("export --keep-float Conv,Sotfmax: %v; want %q", err, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused export wrote %s", out)
	}
}

// Each library error the CLI translates reads with the flag, keeps the
// library's reason and stays reachable by errors.As under a wrapping.
func TestWithFlagNames(t *testing.T) {
	cause := errors.New("permission denied")
	for _, c := range []struct {
		err        error
		want, gone string
	}{
		{&setting.Error{Setting: "batch", Value: "8", Err: errors.New("m.onnx declares a fixed batch of 1")},
			"finetune: --batch 8: m.onnx declares a fixed batch of 1", "finetune: batch"},
		{&setting.Error{Setting: "patience", Value: "3", Err: errors.New("early stopping needs validation data")},
			"--patience 3: early stopping needs validation data", "finetune: patience"},
		{&setting.Error{Setting: "run_dir", Value: "/r", Err: cause},
			"--out /r: permission denied", "run_dir"},
		{&setting.Error{Setting: "max_steps", Value: "-1", Err: cause},
			"--steps -1: permission denied", "max_steps"},
		{&finetune.NotRunDirError{Dir: "/r", Files: []string{"a.txt"}},
			"finetune: --out /r is not empty (it holds a.txt)", "run folder /r"},
		{&datalayout.AmbiguousError{Root: "/d", Found: []string{"voc", "coco"}},
			"it holds voc and coco; name the layout with --format, or point --data at one of them", "name its layout"},
		{&datalayout.SplitError{Root: "/d", Format: "voc", Have: []string{"train", "val"}},
			"has splits train, val: pick one with --split", ""},
		{&datalayout.SplitError{Root: "/d", Format: "folders", Split: "val"},
			"has no splits, and --split val names one", "was asked for"},
		{&contract.LayoutError{Try: contract.NHWC, Msg: "output \"y\" has shape [1 64 64 3]"},
			"output \"y\" has shape [1 64 64 3]; if the output is NHWC, pass --output-layout nhwc", "set its layout"},
		{&contract.LayoutError{Msg: "output \"y\": its class axis reads as axis 2"},
			"axis 2; pass --output-layout nchw|nhwc", "set the output layout"},
		{&contract.LayoutError{Input: true, Try: contract.NHWC, Msg: "input \"x\" [1 224 224 3] has 224 channels in the NCHW layout"},
			"in the NCHW layout; the model may want --nhwc", "input layout"},
		{&contract.LayoutError{Input: true, Try: contract.NCHW, Msg: "input \"x\" has 224 channels in the NHWC layout"},
			"the model may want no --nhwc", "input layout"},
		{&inference.FixedSizeError{Height: 513, Width: 513},
			"the model takes a fixed 513x513 (HxW) input; use --size 513x513 with --resize stretch or letterbox", "preprocess to"},
		{&onnx.FormatError{Path: "best.pt", Err: errors.New("not a valid ONNX protobuf: cannot parse invalid wire-format data")},
			"onnx: best.pt: not a valid ONNX protobuf: cannot parse invalid wire-format data (a PyTorch file? export the model with torch.onnx.export", ""},
	} {
		wrapped := fmt.Errorf("finetune: %w", c.err)
		got := withFlagNames(wrapped)
		if !strings.Contains(got.Error(), c.want) || (c.gone != "" && strings.Contains(got.Error(), c.gone)) {
			t.Errorf("%T: %q; want it to hold %q and not %q", c.err, got, c.want, c.gone)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%T: the library error is not reachable through %q", c.err, got)
		}
	}
	for _, plain := range []error{errors.New("no such file"), &onnx.FormatError{Path: "m.onnx", Err: errors.New("empty file, not an ONNX model")}} {
		if got := withFlagNames(plain); got != plain {
			t.Errorf("an error naming no setting came back as %v", got)
		}
	}
}

// A --model that is a PyTorch checkpoint, not an ONNX file, is refused
// naming the file, with what to do about it.
func TestSegmentModelThatIsNotONNX(t *testing.T) {
	runtimetest.Require(t)
	isolateModelSearch(t)
	dir := t.TempDir()
	pt := filepath.Join(dir, "best.pt")
	if err := os.WriteFile(pt, []byte("PK\x03\x04 a zip of tensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	writeImage(t, filepath.Join(in, "a.png"), 40, 30)
	_, err := runCLI(t, "segment", "--model", pt, "--input", in, "--output", filepath.Join(t.TempDir(), "masks"))
	var fe *onnx.FormatError
	if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), pt) || !strings.Contains(err.Error(), "torch.onnx.export") {
		t.Fatalf("segment --model best.pt: %v; want a FormatError naming the file and torch.onnx.export", err)
	}
}

// Each library's advice, written by setting key, reads by flag, as the
// CLI wrote it when it kept a list of them.
func TestAdviceNamesFlags(t *testing.T) {
	for fix, want := range map[setting.Advice]string{
		finetune.FixMemory:         "lower --batch or --crop, or raise --max-memory if the machine has the memory",
		finetune.FixAddressSpace:   "lower --batch, --crop or --threads, or raise the limit",
		inference.FixDeclared:      "the model's fixed batch or input size, or --size, is too large for this machine",
		pipeline.FixBatches:        "lower --batch, or --size/--scale",
		imageio.FixTensors:         "lower --size or --scale",
		deploy.FixCalibration:      "calibrate at a smaller size (--size/--scale), or leave its layer in float with --keep-float",
		datalayout.FixNoSplitLists: "--format folders pairs JPEGImages/ with SegmentationClass/ by name",
	} {
		err := fmt.Errorf("x.png: %w", &memlimit.TooLargeError{What: "work", Need: 2 << 30, Limit: 1 << 30, From: "{max_memory}", Fix: fix})
		got := withFlagNames(err).Error()
		if want = "x.png: work would need about 2.0 GiB, more than the memory limit of 1.0 GiB (--max-memory): " + want + ": over the memory limit"; got != want || !errors.Is(withFlagNames(err), memlimit.ErrTooLarge) {
			t.Errorf("%q named by flag:\n got %q\nwant %q", err, got, want)
		}
		if strings.Contains(string(fix), "--") {
			t.Errorf("advice %q names a flag", fix)
		}
	}
	if withFlagNames(nil) != nil {
		t.Error("withFlagNames(nil) is not nil")
	}
}

// Where ONNX Runtime could not be loaded from, the error names --ort-lib
// as it did when runtime wrote the flag's name itself.
func TestORTLibErrorNamesFlag(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SEGTUNE_CACHE_DIR", filepath.Join(dir, "cache"))
	t.Setenv(runtime.LibraryEnv, "")
	missing := filepath.Join(dir, "libonnxruntime.so")
	_, err := runtime.FindLibrary(missing)
	if want := "ONNX Runtime library " + missing + " (from --ort-lib): "; err == nil || !strings.HasPrefix(withFlagNames(err).Error(), want) {
		t.Errorf("--ort-lib %s: %v; want it to start %q", missing, withFlagNames(err), want)
	}
	_, err = runtime.FindLibrary("")
	if want := "or point " + runtime.LibraryEnv + " or --ort-lib at your own"; err == nil || !strings.Contains(withFlagNames(err).Error(), want) ||
		!errors.Is(withFlagNames(err), runtime.ErrNoLibrary) {
		t.Errorf("no library: %v; want %q in it, and runtime.ErrNoLibrary", withFlagNames(err), want)
	}
}

// finetune words its errors about the run's settings in its own terms; the
// CLI reads exactly as it did when the library named the flags itself.
func TestFinetuneErrorsReadAsBefore(t *testing.T) {
	cause := errors.New("loss is NaN")
	sha := func(c string) string { return strings.Repeat(c, 64) }
	for _, c := range []struct {
		err  error
		want string
	}{
		{&finetune.ResumeConflictError{Refused: []finetune.SettingChange{{Setting: "batch", Value: "2", Was: "8"}, {Setting: "val-tile", Value: "none", Was: "tile 16x16"}}},
			"--resume continues the run with its recorded settings, and these settings differ from them: --batch (the run has 8), --val-tile (the run has tile 16x16); " +
				"only --lr, --epochs, --steps, --device and --threads may change on resume (drop the others, or start a new run in another --out)"},
		{&finetune.DivergedError{Step: 5, Err: cause, LR: 0.001, Checkpoint: "/r/last.ckpt", CheckpointStep: 4, Dir: "/r"},
			"training diverged at step 5 (loss is NaN); the last good checkpoint is /r/last.ckpt (step 4): continue from it with a lower learning rate: --out /r, --resume, --lr 0.001"},
		{&finetune.DivergedError{Step: 1, Err: cause, LR: 1e29},
			"training diverged at step 1 (loss is NaN); no checkpoint was written before it diverged: run again with a lower learning rate (e.g. --lr 1e+29)"},
		{&finetune.NoBatchError{Examples: 3, Batch: 2, Processes: 2}, "3 training examples make no batch of 4 (2 processes × --batch 2)"},
		{&finetune.NoBatchError{Examples: 1, Batch: 2, Processes: 1}, "1 training examples make no batch of 2"},
		{&finetune.RunExistsError{Dir: "/r"}, "finetune: /r already holds a run (last.ckpt): continue it (--resume) or choose another folder"},
		{&finetune.RanksError{Checkpoint: "/r/last.ckpt", Was: 2, Now: 1, Batch: 4},
			"finetune: /r/last.ckpt: the run was trained by 2 process(es) of --batch 4 (8 examples a step) and this one has 1: the number of processes fixes the batches the data is drawn in, " +
				"so launch it again with 2 processes (mpirun -np 2, srun -n 2), or start a new run in another --out"},
		{&finetune.RanksError{Checkpoint: "/r/last.ckpt", Was: 1, Now: 2, Batch: 4},
			"finetune: /r/last.ckpt: the run was trained by 1 process(es) of --batch 4 (4 examples a step) and this one has 2: the number of processes fixes the batches the data is drawn in, " +
				"so resume it in one process (without mpirun or srun), or start a new run in another --out"},
		{&finetune.RankMismatchError{Rank: 1, What: "settings"},
			"rank 1's settings differ from rank 0's: every process must train the same run on the same files (the same settings, model and --data on every machine)"},
		{&finetune.LeftoverCheckpointsError{Dir: "/r", Found: []string{"best.ckpt", "old.ckpt"}},
			"finetune: /r holds checkpoints of an earlier run (best.ckpt, old.ckpt) but no last.ckpt to continue from: move them elsewhere or choose another --out (segtune neither reuses nor deletes them)"},
		{&finetune.BaseDigestError{Path: "/m.onnx", Checkpoint: "last.ckpt", Got: sha("a"), Recorded: sha("b")},
			"/m.onnx is not the base model last.ckpt was trained from: its SHA-256 is aaaaaaaaaaaa…, the checkpoint records bbbbbbbbbbbb… (the file was replaced or --model names another model)"},
		{&finetune.BaseModelError{Err: cause}, "loss is NaN (the base model of the checkpoint; pass --model to point at it)"},
		{&finetune.BaseModelError{Err: cause, Given: true}, "loss is NaN (the base model given with --model)"},
	} {
		got := withFlagNames(fmt.Errorf("x: %w", c.err))
		if want := "x: " + c.want; got.Error() != want {
			t.Errorf("%T:\n got %q\nwant %q", c.err, got, want)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%T: the library error is not reachable through %q", c.err, got)
		}
	}
}

// finetune's notices read by flag, exactly as the library wrote them when
// it named the flags itself.
func TestFinetuneNoticesReadAsBefore(t *testing.T) {
	for _, c := range []struct {
		n    finetune.Notice
		want string
	}{
		{finetune.ResumedNotice{Changes: []finetune.SettingChange{{Setting: "epochs", Value: "2", Was: "1"}, {Setting: "lr", Value: "0.001", Was: "0.02"}}},
			"resuming with --epochs 2 (was 1), --lr 0.001 (was 0.02)"},
		{finetune.InterruptedNotice{Checkpoint: "/r/last.ckpt", Step: 7}, "interrupted: saved /r/last.ckpt at step 7; continue with --resume"},
		{finetune.FallbackNotice{Setting: "resident", Value: "auto", Reason: "CopyTensors: no data transfer; keeping the training state in host memory"},
			"segtune: --resident auto: CopyTensors: no data transfer; keeping the training state in host memory"},
		{finetune.FallbackNotice{Setting: "precision", Value: "bf16", Reason: "no CUDA GPU here; training in float32"},
			"segtune: --precision bf16: no CUDA GPU here; training in float32"},
		{finetune.FallbackNotice{Setting: "conv_grad", Value: "all", Reason: "why"}, `segtune: --conv-grad all: why`},
		{finetune.DefaultNotice{Setting: "precision", Value: "fp16", Chosen: "CUDA option cudnn_conv_algo_search=HEURISTIC", Why: "cuDNN's exhaustive search re-ran every step in half precision", Override: "cuda_options"},
			"segtune: --precision fp16: CUDA option cudnn_conv_algo_search=HEURISTIC (cuDNN's exhaustive search re-ran every step in half precision; --cuda-opt overrides it)"},
	} {
		if got := c.n.Named(flagOf); got != c.want {
			t.Errorf("%T:\n got %q\nwant %q", c.n, got, c.want)
		}
	}
}

// Through the CLI: a run's folder, a refused resume and a resume that
// changes the learning rate read by flag, as the user typed them.
func TestFinetuneResumeNamesFlags(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data, model := synthData(t, dir, 4, 2), redModel(t, dir)
	run := filepath.Join(dir, "run")
	first := []string{"finetune", "--model", model, "--data", data, "--out", run, "--label-map", "1,2:1;*:0",
		"--crop", "32x32", "--batch", "2", "--epochs", "1", "--seed", "3", "--lr", "0.01", "--threads", "1"}
	if _, err := runCLI(t, first...); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI(t, first...)
	if want := "finetune: " + run + " already holds a run (last.ckpt): continue it (--resume) or choose another folder"; err == nil || err.Error() != want {
		t.Errorf("a second run into %s: %v\nwant %q", run, err, want)
	}
	_, err = runCLI(t, "finetune", "--out", run, "--resume", "--batch", "1", "--seed", "4", "--lr", "0.001")
	want := "finetune: " + filepath.Join(run, "last.ckpt") + ": --resume continues the run with its recorded settings, and these settings differ from them: --batch (the run has 2), --seed (the run has 3); " +
		"only --lr, --epochs, --steps, --device and --threads may change on resume (drop the others, or start a new run in another --out)"
	if err == nil || err.Error() != want {
		t.Errorf("a resume changing --batch and --seed: %v\nwant %q", err, want)
	}
	// --model without --data: the conflict is the model, not missing data.
	other := redModelSized(t, filepath.Join(dir, "other.onnx"), "h", "w")
	_, err = runCLI(t, "finetune", "--out", run, "--resume", "--model", other)
	if err == nil || !strings.Contains(err.Error(), "these settings differ from them: --model (the run has \""+model+"\")") {
		t.Errorf("a resume with another --model: %v\nwant it refused naming --model and the run's model", err)
	}
	stderr, err := runCLIStderr(t, "finetune", "--out", run, "--resume", "--epochs", "2", "--lr", "0.001", "--threads", "1")
	if want := "\nresuming with --epochs 2 (was 1), --lr 0.001 (was 0.01)\n"; err != nil || !strings.Contains("\n"+stderr, want) {
		t.Errorf("a resume changing --lr: %v; stderr:\n%s\nwant the line %q", err, stderr, want)
	}
}

// The same command again with --resume, preprocessing flags included,
// continues the run: the run records the input layout it read from the
// graph, which those flags (no --nhwc) leave to the graph.
func TestFinetuneResumeWithTheSameCommand(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data, model := synthData(t, dir, 4, 2), redModel(t, dir)
	run := filepath.Join(dir, "run")
	cmd := []string{"finetune", "--model", model, "--data", data, "--out", run, "--label-map", "1,2:1;*:0", "--mean", "0.485,0.456,0.406", "--std", "0.229,0.224,0.225",
		"--crop", "32x32", "--batch", "2", "--threads", "1"}
	if _, err := runCLI(t, append(cmd, "--epochs", "1")...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append(cmd, "--epochs", "2", "--resume")...); err != nil {
		t.Errorf("the same command with --resume: %v", err)
	}
}

// A model of fixed input size trains at its size whatever --crop says, so
// resuming with the command that started the run, --crop included, is no
// change of crop.
func TestFinetuneResumeFixedSizeModelWithCrop(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 4, 2)
	model := redModelSized(t, filepath.Join(dir, "fixed.onnx"), 32, 32)
	run := filepath.Join(dir, "run")
	cmd := []string{"finetune", "--model", model, "--data", data, "--out", run, "--label-map", "1,2:1;*:0", "--crop", "16x16", "--batch", "2", "--threads", "1"}
	if _, err := runCLI(t, append(cmd, "--epochs", "1")...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append(cmd, "--epochs", "2", "--resume")...); err != nil {
		t.Errorf("the same command with --resume: %v", err)
	}
}

// --patience runs with --data when the folder has a val split, and is
// refused by name when the run has no validation at all.
func TestFinetunePatienceWithDataFolder(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model, data := redModel(t, dir), synthData(t, dir, 4, 2)
	base := []string{"finetune", "--model", model, "--label-map", "1,2:1;*:0",
		"--crop", "32x32", "--batch", "2", "--epochs", "1", "--threads", "1"}
	common := append(slices.Clone(base), "--patience", "1")
	if _, err := runCLI(t, append(common, "--data", data, "--out", filepath.Join(dir, "run"))...); err != nil {
		t.Errorf("--patience with a val split: %v", err)
	}
	_, err := runCLI(t, append(common, "--out", filepath.Join(dir, "run2"),
		"--train-images", filepath.Join(data, "images", "train"), "--train-masks", filepath.Join(data, "masks", "train"))...)
	if err == nil || !strings.Contains(err.Error(), "--patience 1: early stopping needs validation data") {
		t.Errorf("--patience without validation: %v, want it refused naming --patience", err)
	}
	// Without validation there is no best.ckpt, and the summary says so.
	stdout, err := runCLI(t, append(base, "--out", filepath.Join(dir, "run3"),
		"--train-images", filepath.Join(data, "images", "train"), "--train-masks", filepath.Join(data, "masks", "train"))...)
	if err != nil || !strings.Contains(stdout, "last.ckpt") || strings.Contains(stdout, "best.ckpt") {
		t.Errorf("a run without validation: %v; stdout:\n%s\nwant last.ckpt named and no best.ckpt", err, stdout)
	}
}

// A key is named by the flag of the command that reports it: data split's
// fraction is --val, finetune's --val-split; a path's config.json key is
// named by its flag.
func TestFlagInCommand(t *testing.T) {
	for _, c := range []struct{ cmd, key, want string }{
		{"split", "val_split", "--val"}, {"finetune", "val_split", "--val-split"}, {"split", "split_seed", "--split-seed"},
		{"finetune", "max_steps", "--steps"}, {"finetune", "train.images", "--train-images"}, {"finetune", "val.data", "--data"},
	} {
		if got := flagIn(c.cmd)(c.key); got != c.want {
			t.Errorf("%s %s: %s, want %s", c.cmd, c.key, got, c.want)
		}
	}
	err := (&datalayout.ValSplit{Fraction: 2, By: "image"}).Check()
	if got := setting.Rename(err, flagIn("split")).Error(); !strings.HasPrefix(got, "--val 2") {
		t.Errorf("data split names its fraction %q, want --val", got)
	}
}
