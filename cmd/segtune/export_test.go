package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/models/synth"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// exportSynth writes the embedded segtune-synth model and a small
// synthetic data set (8 training and 6 validation images) into a fresh
// folder.
func exportSynth(t *testing.T) (dir, model, data string) {
	t.Helper()
	dir = t.TempDir()
	model = filepath.Join(dir, "synth.onnx")
	if err := os.WriteFile(model, models.SynthModel, 0o644); err != nil {
		t.Fatal(err)
	}
	data = filepath.Join(dir, "data")
	cfg := synth.DefaultConfig()
	cfg.Seed, cfg.Train, cfg.Val = 11, 8, 6
	if _, err := synth.Generate(data, cfg); err != nil {
		t.Fatal(err)
	}
	return dir, model, data
}

// Bad flags fail before any work, naming the flag, and write nothing.
func TestExportFlagErrors(t *testing.T) {
	dir, model, data := exportSynth(t)
	train, val := filepath.Join(data, "images", "train"), filepath.Join(data, "images", "val")
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	out := filepath.Join(dir, "out", "m.onnx")
	os.Mkdir(filepath.Dir(out), 0o755)
	os.Mkdir(filepath.Join(dir, "out", "folder.onnx"), 0o755)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--out", out}, "--checkpoint C or --model M"},
		{[]string{"--model", model, "--out", out, "--precision", "fp8"}, "--precision"},
		{[]string{"--model", model, "--out", out, "--precision", "int8"}, "needs --calibrate DIR"},
		{[]string{"--model", model, "--out", out, "--precision", "fp16"}, "needs --check-images DIR"},
		{[]string{"--model", model, "--out", out, "--calibrate", train}, "--calibrate is for --precision int8"},
		{[]string{"--model", model, "--out", out, "--keep-float", "Conv"}, "--keep-float is for"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", empty}, "--calibrate " + empty + " holds no images"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", filepath.Join(dir, "nope")}, "--calibrate"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", train, "--calibrate-method", "kl"}, "--calibrate-method"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", train, "--percentile", "99"}, "--percentile is for --calibrate-method percentile"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", train, "--activation-type", "int4"}, "--activation-type"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", train, "--min-agreement", "2"}, "--min-agreement"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", train, "--calibrate-count", "3"}, "--calibrate-count 3 is below --calibrate-min-images 8"},
		{[]string{"--model", model, "--out", out, "--precision", "int8", "--calibrate", train, "--calibrate-min-images", "-1"}, "--calibrate-min-images -1: give a count"},
		{[]string{"--model", model, "--out", out, "--precision", "fp16", "--check-images", val, "--calibrate-min-images", "3"}, "--calibrate-min-images is for --precision int8"},
		{[]string{"--model", model, "--out", out, "--precision", "fp16", "--check-masks", val}, "--check-masks needs --check-images"},
		{[]string{"--model", model, "--out", out, "--precision", "fp16", "--check-images", val, "--check-masks", train}, "--check-masks"},
		{[]string{"--model", model, "--out", model, "--precision", "fp16", "--check-images", val}, "would replace the model being exported"},
		{[]string{"--model", model, "--out", filepath.Join(dir, "synth.segtune.json.onnx"), "--precision", "fp16", "--check-images", val, "--preprocess", filepath.Join(dir, "synth.segtune.json.report.json")}, "would replace the --preprocess file"},
		{[]string{"--model", model, "--out", filepath.Join(dir, "out", "folder.onnx"), "--precision", "fp16", "--check-images", val}, "not a regular file"},
		{[]string{"--checkpoint", model, "--out", out}, "not a segtune checkpoint"},
	}
	for _, c := range cases {
		_, err := runCLI(t, append([]string{"export"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("export %s: error %v, want one containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 { // the folder.onnx folder only
		t.Errorf("files written despite the errors: %v", entries)
	}
}

// int8 and fp16 exports of segtune-synth: checked, reported, written with
// a sidecar that eval picks up.
func TestExportSynthPrecisions(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	train := filepath.Join(data, "images", "train")
	val, valMasks := filepath.Join(data, "images", "val"), filepath.Join(data, "masks", "val")
	for _, prec := range []string{"int8", "fp16"} {
		t.Run(prec, func(t *testing.T) {
			// --out in a folder that does not exist yet: export makes it.
			out := filepath.Join(dir, "deploy", prec, "synth."+prec+".onnx")
			args := []string{"export", "--model", model, "--out", out, "--precision", prec,
				"--check-images", val, "--check-masks", valMasks, "--threads", "2", "--json"}
			if prec == "int8" {
				args = append(args, "--calibrate", train, "--calibrate-method", "percentile")
			}
			stdout, err := runCLI(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			var rep deploy.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("%v: %q", err, stdout)
			}
			jsonPath, textPath := deploy.ReportPaths(out)
			saved, err := os.ReadFile(jsonPath)
			if err != nil || string(saved) != stdout {
				t.Errorf("saved report differs from the printed one (%v)", err)
			}
			if text, err := os.ReadFile(textPath); err != nil || !strings.Contains(string(text), "agreement") {
				t.Errorf("text report: %v %q", err, text)
			}
			c := rep.Check
			if !rep.Passed || c == nil || c.Images != 6 || c.Float == nil || c.Exported == nil {
				t.Fatalf("report %+v", rep)
			}
			min := map[string]float64{"int8": 0.95, "fp16": 0.99}[prec]
			if c.PixelAgreement < min || *c.MeanIoUDelta < -0.05 {
				t.Errorf("agreement %.4f, mean IoU change %+.4f", c.PixelAgreement, *c.MeanIoUDelta)
			}
			if rep.OutputBytes >= rep.SourceBytes*6/10 {
				t.Errorf("%s model is %d bytes, the float one %d", prec, rep.OutputBytes, rep.SourceBytes)
			}
			// The written model keeps the contract and carries its settings.
			m, err := onnx.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			src, _ := onnx.Load(model)
			a, _ := contract.Read(src, contract.Overrides{})
			b, err := contract.Read(m, contract.Overrides{})
			if err != nil || a.Input != b.Input || a.Output != b.Output || a.Kind != b.Kind || a.Classes != b.Classes || a.InputLayout != b.InputLayout {
				t.Errorf("contract %+v, want %+v (%v)", b, a, err)
			}
			side, found, err := imageio.LoadModelSidecar(out)
			if err != nil || !found || side.Preprocess == nil || side.Preprocess.ValueOffset != -1 || len(side.Classes) != 3 {
				t.Errorf("sidecar %+v found=%v %v", side, found, err)
			}
			// eval reads the sidecar: no preprocessing flags needed.
			stdout, err = runCLI(t, "eval", "--model", out, "--images", val, "--masks", valMasks, "--json")
			if err != nil {
				t.Fatal(err)
			}
			var sum evaluate.Summary
			if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
				t.Fatal(err)
			}
			if d := *sum.MeanIoU - *c.Exported.MeanIoU; d > 1e-9 || d < -1e-9 {
				t.Errorf("eval of the written model: mean IoU %.6f, the export check said %.6f", *sum.MeanIoU, *c.Exported.MeanIoU)
			}
		})
	}
}

// A model below --min-agreement is reported and not written.
func TestExportRefusesBelowMinAgreement(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	out := filepath.Join(dir, "strict.onnx")
	_, err := runCLI(t, "export", "--model", model, "--out", out, "--precision", "int8",
		"--calibrate", filepath.Join(data, "images", "train"), "--calibrate-count", "2", "--calibrate-min-images", "2", "--per-tensor", "--min-agreement", "1")
	if err == nil || !strings.Contains(err.Error(), "nothing written") || !strings.HasSuffix(err.Error(), " (--min-agreement sets the bar)") {
		t.Fatalf("err = %v", err)
	}
	if strings.HasPrefix(err.Error(), "segtune:") { // main prefixes it once
		t.Errorf("err = %q: printed as \"segtune: segtune: …\"", err)
	}
	for _, p := range []string{out, imageio.SidecarPath(out)} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s written", p)
		}
	}
}

// Acceptance on the shared person model and a few CamVid images (small
// enough for two CPU cores): int8 within one IoU point of fp32 on person,
// fp16 agreeing on ≥ 99 % of pixels.
func TestExportPersonModelCamVid(t *testing.T) {
	runtimetest.Require(t)
	model := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	camvid := testassets.Require(t, "data", "camvid")
	dir := t.TempDir()
	// Four validation images with people, spread over the sequences.
	val, masks := filepath.Join(dir, "val"), filepath.Join(dir, "masks")
	os.Mkdir(val, 0o755)
	os.Mkdir(masks, 0o755)
	all, err := imageio.ListImages(filepath.Join(camvid, "images", "val"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range deploy.Sample(all, 4) {
		name := filepath.Base(p)
		if err := os.Symlink(p, filepath.Join(val, name)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(camvid, "masks", "val", name), filepath.Join(masks, name)); err != nil {
			t.Fatal(err)
		}
	}
	common := append([]string{"--model", model, "--check-images", val, "--check-masks", masks,
		"--label-map", "9,10:1;11:255;*:0", "--threads", "2", "--json"}, personPreprocess...)
	run := func(prec string, extra ...string) deploy.Report {
		t.Helper()
		out := filepath.Join(dir, "person."+prec+".onnx")
		stdout, err := runCLI(t, append(append([]string{"export", "--out", out, "--precision", prec}, common...), extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rep deploy.Report
		if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
	q := run("int8", "--calibrate", filepath.Join(camvid, "images", "train"), "--calibrate-count", "4", "--calibrate-min-images", "4")
	fp, ip := q.Check.Float.Classes[1].IoU, q.Check.Exported.Classes[1].IoU
	if fp == nil || ip == nil || *ip < *fp-0.01 {
		t.Errorf("person IoU fp32 %v, int8 %v: more than one point lost", deref(fp), deref(ip))
	}
	if q.Check.Kernels.Integer < 60 {
		t.Errorf("ONNX Runtime runs %d integer nodes", q.Check.Kernels.Integer)
	}
	t.Logf("int8: person IoU %.4f → %.4f, agreement %.4f, %.2f → %.2f images/s", *fp, *ip, q.Check.PixelAgreement,
		q.Check.FloatImagesPerSec, q.Check.ExportedImagesPerSec)
	h := run("fp16")
	if h.Check.PixelAgreement < 0.99 {
		t.Errorf("fp16 agreement %.4f", h.Check.PixelAgreement)
	}
	t.Logf("fp16: agreement %.5f, person IoU %.4f", h.Check.PixelAgreement, deref(h.Check.Exported.Classes[1].IoU))
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}

// int8 from a fine-tuning checkpoint: its run's settings prepare the
// images and go into the sidecar; a moved base model is found with --model.
func TestExportCheckpointInt8(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	run := filepath.Join(dir, "run")
	if _, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", run, "--steps", "2", "--batch", "2", "--threads", "2"); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(dir, "moved.onnx")
	if err := os.Rename(model, moved); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ck.int8.onnx")
	args := []string{"export", "--checkpoint", filepath.Join(run, "best.ckpt"), "--out", out, "--precision", "int8",
		"--calibrate", filepath.Join(data, "images", "train"), "--check-images", filepath.Join(data, "images", "val"),
		"--check-masks", filepath.Join(data, "masks", "val"), "--threads", "2", "--json"}
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Fatalf("base model moved, no --model: err = %v", err)
	}
	stdout, err := runCLI(t, append(args, "--model", moved)...)
	if err != nil {
		t.Fatal(err)
	}
	var rep deploy.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || rep.Quantization == nil || rep.Quantization.QuantizedNodes["Conv"] == 0 || rep.Check.Exported == nil {
		t.Errorf("report %+v", rep)
	}
	side, found, err := imageio.LoadModelSidecar(out)
	if err != nil || !found || side.Preprocess.ValueScale == 0 || len(side.Classes) != 3 {
		t.Errorf("sidecar %+v (%v)", side, err)
	}
}

// Defect: export from a checkpoint replaced what the run depends on:
// --out as the base model (the checkpoint orphaned), as the base model's
// sidecar (ONNX bytes in a JSON file), or as the run's last.ckpt (its
// resume point). Each is refused, naming what it would replace, and left
// as it was.
func TestExportCheckpointProtectsItsRun(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	run := filepath.Join(dir, "run")
	if _, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", run, "--steps", "2", "--batch", "2", "--threads", "2"); err != nil {
		t.Fatal(err)
	}
	side := imageio.SidecarPath(model)
	os.WriteFile(side, []byte(`{"classes": ["a", "b", "c"]}`), 0o644)
	last := filepath.Join(run, "last.ckpt")
	for _, c := range []struct{ out, want string }{
		{model, "the checkpoint's base model"},
		{side, "the base model's sidecar"},
		{last, "a checkpoint of the run"},
	} {
		before, _ := os.ReadFile(c.out)
		_, err := runCLI(t, "export", "--checkpoint", filepath.Join(run, "best.ckpt"), "--out", c.out, "--precision", "fp16",
			"--check-images", filepath.Join(data, "images", "val"), "--threads", "2")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--out %s: err = %v, want a refusal naming %s", c.out, err, c.want)
		}
		if after, _ := os.ReadFile(c.out); !bytes.Equal(before, after) {
			t.Errorf("--out %s: the file was changed", c.out)
		}
	}
}

// --out naming one of the user's files that is no model — here one of the
// very --check-images the export compares on — is refused and the file
// left as it was; an earlier export at --out is replaced as before.
func TestExportDoesNotReplaceAUsersFile(t *testing.T) {
	runtimetest.Require(t)
	dir, model, data := exportSynth(t)
	val := filepath.Join(data, "images", "val")
	imgs, err := imageio.ListImages(val)
	if err != nil || len(imgs) == 0 {
		t.Fatal(imgs, err)
	}
	before, _ := os.ReadFile(imgs[0])
	_, err = runCLI(t, "export", "--model", model, "--out", imgs[0], "--check-images", val, "--threads", "2")
	if err == nil || !strings.Contains(err.Error(), "--out "+imgs[0]+": ") || !strings.Contains(err.Error(), "not an ONNX model") {
		t.Errorf("--out a check image: err = %v, want a refusal naming --out", err)
	}
	if after, _ := os.ReadFile(imgs[0]); !bytes.Equal(before, after) {
		t.Fatalf("%s was replaced", imgs[0])
	}
	out := filepath.Join(dir, "again.onnx")
	for range 2 {
		if _, err := runCLI(t, "export", "--model", model, "--out", out, "--check-images", val, "--threads", "2"); err != nil {
			t.Fatalf("exporting to %s (again): %v", out, err)
		}
	}
}

// torchSegmenter is a small segmentation net exported by PyTorch as
// README's Quickstart exports a torchvision model: dynamic batch, height
// and width, which leaves the output's class axis symbolic.
const torchSegmenter = `
import sys, torch, torch.nn as nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU())
        self.head = nn.Conv2d(16, 3, 1)
    def forward(self, x):
        y = self.head(self.body(x))
        return nn.functional.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)
torch.onnx.export(Net().eval(), torch.rand(1, 3, 64, 64), sys.argv[1], opset_version=17,
    input_names=["image"], output_names=["out"],
    dynamic_axes={"image": {0: "n", 2: "h", 3: "w"}, "out": {0: "n", 2: "h", 3: "w"}})
`

// A PyTorch export's class count is read from its last convolution; the
// fp16 and int8 exports must keep it readable, or their contract check
// refuses them ("the exported model's contract differs").
func TestExportTorchModelWithSymbolicClasses(t *testing.T) {
	runtimetest.Require(t)
	py := testassets.RequirePython(t, "torch")
	dir, _, data := exportSynth(t)
	model := filepath.Join(dir, "torch.onnx")
	if out, err := exec.Command(py, "-c", torchSegmenter, model).CombinedOutput(); err != nil {
		t.Fatalf("PyTorch export: %v\n%s", err, out)
	}
	m, err := onnx.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	if d := m.Graph().GetOutput()[0].GetType().GetTensorType().GetShape().GetDim()[1]; d.GetDimValue() != 0 {
		t.Fatalf("PyTorch declared the class axis (%v): the case under test needs it symbolic", d)
	}
	train, val := filepath.Join(data, "images", "train"), filepath.Join(data, "images", "val")
	for _, prec := range []string{"fp16", "int8"} {
		out := filepath.Join(dir, "torch."+prec+".onnx")
		args := []string{"export", "--model", model, "--out", out, "--precision", prec, "--check-images", val,
			"--min-agreement", "0.5", "--threads", "2"}
		if prec == "int8" {
			args = append(args, "--calibrate", train)
		}
		if _, err := runCLI(t, args...); err != nil {
			t.Errorf("%s export: %v", prec, err)
			continue
		}
		exp, err := onnx.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := contract.Read(exp, contract.Overrides{}); err != nil || c.Classes != 3 {
			t.Errorf("%s export: contract %+v (%v), want 3 classes", prec, c, err)
		}
	}
}
