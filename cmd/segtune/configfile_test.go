package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// configApp is an app with one command of configCommands whose action
// records the flag values it sees.
func configApp(got map[string]any) *cli.App {
	app := &cli.App{
		Name:           "segtune",
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{
			Name: "segment",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true},
				&cli.StringFlag{Name: "mean"},
				&cli.Float64Flag{Name: "lr", Value: 1e-4},
				&cli.IntFlag{Name: "batch", Value: 4},
				&cli.BoolFlag{Name: "no-flip"},
				&cli.StringSliceFlag{Name: "class"},
			},
			Action: func(c *cli.Context) error {
				for _, n := range []string{"model", "mean", "lr", "batch", "no-flip"} {
					got[n] = c.Value(n)
				}
				got["class"] = c.StringSlice("class")
				return nil
			},
		}},
	}
	installConfigFiles(app.Commands)
	return app
}

func writeText(t *testing.T, path, text string) string {
	t.Helper()
	writeFile(t, path, []byte(text))
	return path
}

func TestConfigFileSetsUnsetFlags(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // m.onnx, relative, is read against the working directory
	writeText(t, filepath.Join(dir, "m.onnx"), "a model")
	yamlFile := writeText(t, filepath.Join(dir, "c.yaml"),
		"model: m.onnx\nmean: [0.485, 0.456, 0.406]\nlr: 3e-4\nbatch: 2\nno-flip: true\nclass: [a, b]\n")
	jsonFile := writeText(t, filepath.Join(dir, "c.json"),
		`{"m": "m.onnx", "mean": "0.5,0.5,0.5", "lr": 0.0003, "batch": 2, "no-flip": true, "class": ["a", "b"]}`)
	for _, file := range []string{yamlFile, jsonFile} {
		got := map[string]any{}
		if err := configApp(got).Run([]string{"segtune", "segment", "--config", file, "--batch", "8"}); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		want := map[string]any{"model": "m.onnx", "lr": 3e-4, "batch": 8, "no-flip": true,
			"class": []string{"a", "b"}}
		if filepath.Ext(file) == ".yaml" {
			want["mean"] = "0.485,0.456,0.406"
		} else {
			want["mean"] = "0.5,0.5,0.5"
		}
		for name, w := range want {
			if !reflect.DeepEqual(got[name], w) {
				t.Errorf("%s: --%s is %#v, want %#v (the command line's --batch wins)", filepath.Base(file), name, got[name], w)
			}
		}
	}
}

func TestConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, text string
		args       []string
		want       string
	}{
		{"unknown flag", "model: m.onnx\nlearning-rate: 1\n", nil, `"learning-rate" is not a flag of segtune segment`},
		{"nested config", "model: m.onnx\nconfig: other.yaml\n", nil, `"config" is not a flag`},
		{"map value", "model: m.onnx\nbatch: {a: 1}\n", nil, "batch: a mapping of 1 key"},
		{"null value", "model: m.onnx\nmean:\n", nil, "mean: no value"},
		{"bad number", "model: m.onnx\nbatch: many\n", nil, `batch "many"`},
		{"not a mapping", "- a\n- b\n", nil, "not a YAML or JSON mapping"},
		{"empty", "", nil, "no settings in it"},
		{"required missing", "lr: 1\n", nil, `Required flag "model" not set`},
	}
	for _, tc := range cases {
		file := writeText(t, filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml"), tc.text)
		err := configApp(map[string]any{}).Run(append([]string{"segtune", "segment", "--config", file}, tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Not a regular file: a folder, and a missing file.
	for _, path := range []string{dir, filepath.Join(dir, "missing.yaml")} {
		err := configApp(map[string]any{}).Run([]string{"segtune", "segment", "--config", path})
		if err == nil || !strings.Contains(err.Error(), "--config") || !strings.Contains(err.Error(), path) {
			t.Errorf("--config %s: error %v, want one naming the flag and the path", path, err)
		}
	}
}

// A run's config.json given to --config repeats the run: the same
// configuration, and with the same seed the same weights; a flag given
// beside it changes only its setting.
func TestFinetuneConfigRepeatsRun(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 8, 4)
	model := redModel(t, dir)
	first := filepath.Join(dir, "first")
	if _, err := runCLI(t, "finetune", "--model", model, "--data", data, "--out", first, "--label-map", "1,2:1;*:0",
		"--crop", "32x32", "--batch", "4", "--epochs", "2", "--lr", "1e-2", "--seed", "7", "--threads", "1",
		"--alpha", "0.01", "--brightness", "0.2", "--loss", "ce+dice"); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "again")
	if _, err := runCLI(t, "finetune", "--config", filepath.Join(first, "config.json"), "--out", again); err != nil {
		t.Fatal(err)
	}
	if a, b := readRunConfig(t, first), readRunConfig(t, again); !reflect.DeepEqual(a, b) {
		t.Errorf("the repeated run's configuration differs:\n%+v\n%+v", a, b)
	}
	if !sameWeights(t, filepath.Join(first, "model.onnx"), filepath.Join(again, "model.onnx")) {
		t.Error("the repeated run, same seed, trained other weights")
	}

	varied := filepath.Join(dir, "varied")
	if _, err := runCLI(t, "finetune", "--config", filepath.Join(first, "config.json"), "--out", varied, "--lr", "5e-3"); err != nil {
		t.Fatal(err)
	}
	a, b := readRunConfig(t, first), readRunConfig(t, varied)
	if b.LR != 5e-3 {
		t.Errorf("--lr beside --config: the run's lr is %v, want 5e-3", b.LR)
	}
	b.LR = a.LR
	if !reflect.DeepEqual(a, b) {
		t.Errorf("--lr changed other settings too:\n%+v\n%+v", a, b)
	}
	if sameWeights(t, filepath.Join(first, "model.onnx"), filepath.Join(varied, "model.onnx")) {
		t.Error("another learning rate trained the same weights")
	}
}

// Paths in a --config file are read as on the command line, against the
// working directory; one that names nothing is refused naming the file,
// the key and the folder it was read against, before any work (#45).
func TestConfigFilePathsNameTheirKey(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeText(t, filepath.Join(dir, "m.onnx"), "a model")
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	for _, tc := range []struct{ text, want string }{
		{"model: sub/missing.onnx\n", `model "sub/missing.onnx"`},
		{"model: missing.onnx\n", `model "missing.onnx"`},
	} {
		file := writeText(t, filepath.Join(dir, "sub", "c.yaml"), tc.text)
		err := configApp(map[string]any{}).Run([]string{"segtune", "segment", "--config", file})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), dir) {
			t.Errorf("%q: error %v, want one naming %s, the key and the working directory", tc.text, err, file)
		}
	}
	// A model's name (the registry's) is no path; m.onnx is found here
	// though the file is in sub/.
	for _, text := range []string{"model: deeplabv3-person\n", "model: m.onnx\n"} {
		file := writeText(t, filepath.Join(dir, "sub", "c.yaml"), text)
		if err := configApp(map[string]any{}).Run([]string{"segtune", "segment", "--config", file}); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// A run records its paths absolute: its config.json repeats it from
// another folder, and --resume continues it after cd. A config.json with
// a relative path that names nothing from here (hand-edited, or of an
// older segtune) is refused naming the file and the key before any work;
// so is a checkpoint's (#45).
func TestFinetuneConfigReplaysFromAnotherFolder(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	t.Chdir(dir)
	synthData(t, dir, 4, 2)
	redModel(t, dir)
	first := filepath.Join(dir, "first")
	if _, err := runCLI(t, "finetune", "--model", "red.onnx", "--data", "synth", "--out", first, "--label-map", "1,2:1;*:0",
		"--crop", "32x32", "--batch", "2", "--epochs", "1", "--lr", "1e-2", "--seed", "7", "--threads", "1"); err != nil {
		t.Fatal(err)
	}
	rec := readRunConfig(t, first)
	if rec.Train.Data != filepath.Join(dir, "synth") || rec.Network.BaseModel != filepath.Join(dir, "red.onnx") {
		t.Fatalf("the run recorded data %q and model %q, want them absolute", rec.Train.Data, rec.Network.BaseModel)
	}
	elsewhere := filepath.Join(dir, "elsewhere")
	os.Mkdir(elsewhere, 0o755)
	os.Mkdir(filepath.Join(elsewhere, "synth"), 0o755) // a folder of the same name here is not the run's data
	t.Chdir(elsewhere)
	again := filepath.Join(dir, "again")
	if _, err := runCLI(t, "finetune", "--config", filepath.Join(first, "config.json"), "--out", again); err != nil {
		t.Fatalf("replaying the run from another folder: %v", err)
	}
	if a, b := readRunConfig(t, first), readRunConfig(t, again); !reflect.DeepEqual(a, b) {
		t.Errorf("the replayed run's configuration differs:\n%+v\n%+v", a, b)
	}
	if _, err := runCLI(t, "finetune", "--resume", "--out", first, "--epochs", "2"); err != nil {
		t.Fatalf("resuming the run from another folder: %v", err)
	}

	// A checkpoint of an older segtune, which recorded the paths as
	// given: resumed from where it ran, it goes on; from elsewhere it is
	// refused naming the checkpoint and the key.
	last := filepath.Join(first, "last.ckpt")
	ck, err := checkpoint.Load(last)
	if err != nil {
		t.Fatal(err)
	}
	var ckCfg finetune.Config
	if err := json.Unmarshal(ck.Config, &ckCfg); err != nil {
		t.Fatal(err)
	}
	ckCfg.Train.Data, ckCfg.Network.BaseModel = "synth", "red.onnx"
	if ck.Config, err = json.Marshal(ckCfg); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Save(last, ck); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	t.Chdir(empty)
	_, err = runCLI(t, "finetune", "--resume", "--out", first, "--epochs", "3")
	if err == nil || !strings.Contains(err.Error(), last) || !strings.Contains(err.Error(), `"red.onnx"`) || !strings.Contains(err.Error(), empty) {
		t.Errorf("resuming an older checkpoint's relative paths elsewhere: error %v, want one naming %s, the path and %s", err, last, empty)
	}
	t.Chdir(dir)
	if _, err := runCLI(t, "finetune", "--resume", "--out", first, "--epochs", "3"); err != nil {
		t.Errorf("resuming an older checkpoint where it ran: %v", err)
	}
	t.Chdir(elsewhere)

	// A config.json whose paths are relative, as an older segtune wrote it.
	rec.Train.Data, rec.Network.BaseModel = "synth-moved", "red.onnx"
	b, _ := json.Marshal(rec)
	old := writeText(t, filepath.Join(dir, "old.json"), string(b))
	_, err = runCLI(t, "finetune", "--config", old, "--out", filepath.Join(dir, "old"))
	if err == nil || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), `network.base_model "red.onnx"`) ||
		!strings.Contains(err.Error(), elsewhere) {
		t.Errorf("a relative path that names nothing here: error %v, want one naming %s, network.base_model and %s", err, old, elsewhere)
	}
	if _, err := os.Stat(filepath.Join(dir, "old")); err == nil {
		t.Error("the refused run made its folder")
	}
	_, err = runCLI(t, "finetune", "--config", old, "--model", filepath.Join(dir, "red.onnx"), "--out", filepath.Join(dir, "old"))
	if err == nil || !strings.Contains(err.Error(), `train.data "synth-moved"`) {
		t.Errorf("relative data that names nothing here: error %v, want one naming train.data", err)
	}
}

func readRunConfig(t *testing.T, run string) finetune.Config {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(run, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg finetune.Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sameWeights(t *testing.T, a, b string) bool {
	t.Helper()
	ma, err := onnx.Load(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := onnx.Load(b)
	if err != nil {
		t.Fatal(err)
	}
	ia, ib := ma.Graph().GetInitializer(), mb.Graph().GetInitializer()
	if len(ia) != len(ib) {
		return false
	}
	for i := range ia {
		if ia[i].GetName() != ib[i].GetName() || !bytes.Equal(ia[i].GetRawData(), ib[i].GetRawData()) ||
			!reflect.DeepEqual(ia[i].GetFloatData(), ib[i].GetFloatData()) {
			return false
		}
	}
	return true
}

// Every flag of finetune either makes a setting of the run, which resuming
// checks and a repeated run (--config config.json) takes from the flag, or
// is one of the few that do not: a new flag missing from
// finetune's table would be silently ignored by both.
func TestFinetuneFlagsAreSettings(t *testing.T) {
	notSettings := map[string]bool{"out": true, "resume": true, "json": true, "config": true}
	for _, cmd := range newApp().Commands {
		if cmd.Name != "finetune" {
			continue
		}
		for _, f := range cmd.Flags {
			name := f.Names()[0]
			isSetting := len(givenKeys([]string{name}, finetune.RunSettings())) == 1
			if isSetting == notSettings[name] {
				t.Errorf("--%s: a setting of the run %v, listed as not one %v", name, isSetting, notSettings[name])
			}
		}
		return
	}
	t.Fatal("no finetune command")
}

// segment's required flags may come from --config, and a file:// URL or a
// model name there is read as on the command line.
func TestSegmentFromConfigFile(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	in := imageFolder(t, dir, 40, 30)
	out := filepath.Join(dir, "out")
	cfg := writeText(t, filepath.Join(dir, "segment.yaml"),
		"model: "+model+"\ninput: file://"+in+"\noutput: "+out+"\noverlay: true\n")
	if _, err := runCLI(t, "segment", "--config", cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.png", "overlays/a.png"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("--config's segment did not write %s: %v", name, err)
		}
	}
	if _, err := runCLI(t, "segment", "--config", cfg, "--output", in); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("--output over --input beside --config: error %v, want the overlap refused naming --output", err)
	}
}
