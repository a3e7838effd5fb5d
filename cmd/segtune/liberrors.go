package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/inference/folder"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/quantize"
)

// The libraries name the setting an error is about by its field; the user
// set it with a flag. nameFlags wraps every command's action so that its
// errors name the flag instead.

// adviceFlags are the libraries' advice (exported constants their errors
// carry), by flag.
var adviceFlags = map[string]string{
	finetune.FixMemory:         "lower --batch or --crop, or raise --max-memory if the machine has the memory",
	finetune.FixAddressSpace:   "lower --batch, --crop or --threads, or raise the limit",
	inference.FixDeclared:      "the model's fixed batch or input size, or --size, is too large for this machine",
	pipeline.FixBatches:        "lower --batch, or --size/--scale",
	imageio.FixTensors:         "lower --size or --scale",
	deploy.FixCalibration:      "calibrate at a smaller size (--size/--scale), or leave its layer in float with --keep-float",
	datalayout.FixNoSplitLists: "--format folders pairs JPEGImages/ with SegmentationClass/ by name",
}

// nameFlags makes the actions of cmds (and their subcommands) report
// library errors by flag (withFlagNames).
func nameFlags(cmds []*cli.Command) {
	for _, cmd := range cmds {
		nameFlags(cmd.Subcommands)
		if cmd.Action == nil {
			continue
		}
		action := cmd.Action
		cmd.Action = func(c *cli.Context) error { return withFlagNames(action(c)) }
	}
}

// withFlagNames returns err with the part a library wrote about a setting
// rewritten to name its flag; the error it wraps stays reachable.
func withFlagNames(err error) error {
	if err == nil {
		return nil
	}
	err = byFlag(err)
	var ke *quantize.UnmatchedKeepError
	if errors.As(err, &ke) {
		return renamed(err, ke.Error(), fmt.Sprintf("--keep-float names %s, which no node of the model has as op type, name or output", strings.Join(ke.Names, ", ")))
	}
	var nr *finetune.NotRunDirError
	if errors.As(err, &nr) {
		return renamed(err, "run folder "+nr.Dir, "--out "+nr.Dir)
	}
	var ro *finetune.RunDirOverlapError
	if errors.As(err, &ro) {
		return renamed(err, "run folder "+ro.Dir, "--out "+ro.Dir)
	}
	var fo *folder.ForeignOutputError
	if errors.As(err, &fo) {
		return renamed(err, fo.Error(), fo.Error()+" (a mask of yours? choose another --output, or --overwrite replaces it)")
	}
	var ae *datalayout.AmbiguousError
	if errors.As(err, &ae) {
		return renamed(err, "name its layout, or point at one of them", "name the layout with --format, or point --data at one of them")
	}
	var le *contract.LayoutError
	if errors.As(err, &le) {
		return renamed(err, le.Advice(), layoutFlagAdvice(le))
	}
	var fs *inference.FixedSizeError
	if errors.As(err, &fs) {
		return renamed(err, fs.Advice(), fmt.Sprintf("use --size %dx%d with --resize stretch or letterbox", fs.Height, fs.Width))
	}
	for advice, byFlag := range adviceFlags {
		if strings.Contains(err.Error(), advice) {
			return renamed(err, advice, byFlag)
		}
	}
	var fe *onnx.FormatError
	if errors.As(err, &fe) && fe.LooksLike == "" { // content names it better than the name
		if hint := notONNXHint(fe.Path); hint != "" {
			return &renamedError{err: err, msg: err.Error() + " (" + hint + ")"}
		}
	}
	var sp *datalayout.SplitError
	if errors.As(err, &sp) {
		switch {
		case sp.Split == "":
			return renamed(err, ": pick one", ": pick one with --split")
		case len(sp.Have) == 0:
			return renamed(err, "split "+sp.Split+" was asked for", "--split "+sp.Split+" names one")
		}
	}
	return err
}

// layoutFlagAdvice is LayoutError's advice by flag: --nhwc for the input,
// --output-layout for the output.
func layoutFlagAdvice(le *contract.LayoutError) string {
	switch {
	case le.Input && le.Try == contract.NHWC:
		return "the model may want --nhwc"
	case le.Input:
		return "the model may want no --nhwc"
	case le.Try != "":
		return fmt.Sprintf("if the output is %s, pass --output-layout %s", le.Try, strings.ToLower(string(le.Try)))
	}
	return "pass --output-layout nchw|nhwc"
}

// notONNXHint says, for a --model file that is no ONNX model, what its
// name suggests it is and how to get an ONNX model from it ("" when the
// name says nothing).
func notONNXHint(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".pt", ".pth", ".ckpt", ".bin", ".safetensors":
		return "a PyTorch file? export the model with torch.onnx.export, as README's quickstart shows"
	case ".pb", ".h5", ".keras", ".tflite":
		return "a TensorFlow or Keras model? convert it with tf2onnx: python3 -m tf2onnx.convert"
	case ".xml":
		return "an OpenVINO IR? export its source model to ONNX instead"
	}
	return ""
}

// renamed is err with its message's part old replaced by new.
func renamed(err error, old, new string) error {
	return &renamedError{err: err, msg: strings.Replace(err.Error(), old, new, 1)}
}

type renamedError struct {
	err error
	msg string
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// renamedWithin is err with each phrase old of pairs (old, new, ...)
// replaced by its new within the part of the message that inner wrote.
func renamedWithin(err, inner error, pairs ...string) error {
	return renamed(err, inner.Error(), strings.NewReplacer(pairs...).Replace(inner.Error()))
}

// flagNotice is finetune's notice n as the CLI words it: by flag.
func flagNotice(n finetune.Notice) string {
	switch n := n.(type) {
	case finetune.ResumedNotice:
		return "resuming with " + flagChanges(n.Changes, "%s %s (was %s)")
	case finetune.InterruptedNotice:
		return fmt.Sprintf("interrupted: saved %s at step %d; continue with --resume", n.Checkpoint, n.Step)
	case finetune.FallbackNotice:
		return fmt.Sprintf("segtune: %s %s: %s", flagOf(n.Setting), n.Value, n.Reason)
	case finetune.DefaultNotice:
		return fmt.Sprintf("segtune: %s %s: %s (%s; %s overrides it)", flagOf(n.Setting), n.Value, n.Chosen, n.Why, flagOf(n.Override))
	}
	return n.String()
}

// flagChanges lists changed settings of a run by flag, each as format
// writes its flag, value and the run's value.
func flagChanges(changes []finetune.SettingChange, format string) string {
	var parts []string
	for _, c := range changes {
		parts = append(parts, fmt.Sprintf(format, flagOf(c.Setting), c.Value, c.Was))
	}
	return strings.Join(parts, ", ")
}
