package preprocsearch

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/evaluate/preprocsearch/searchtest"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference/report"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// A job finds the preprocessing of a model made for 0..1 values, prints
// the table naming the choice, writes the sidecar and says so; asked
// again, it refuses to write over it, before any work, as a usage error.
func TestJobWritesTheChosenSidecar(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	pre := imageio.Preprocess{ValueScale: 1.0 / 255}
	x := float32(200.0 / 255)
	model := searchtest.ThresholdModel(t, filepath.Join(dir, "m.onnx"), x)
	images, masks := searchtest.LabelledNoise(t, dir, pre, x, 10, 24, 16)
	var out, notes bytes.Buffer
	opened := 0
	open := evaluate.Openers{
		Data: func(string) (*datalayout.Set, error) { t.Fatal("no data set was given"); return nil, nil },
		Folder: func(key, v string) (*storage.Folder, error) {
			opened++
			return storage.OpenFolder(context.Background(), v)
		},
	}
	cfg := DefaultConfig()
	cfg.Find, cfg.Images, cfg.Masks, cfg.Sample, cfg.WriteSidecar = true, images, masks, 8, true
	job := Job{Config: cfg, Model: model, Openers: open, Print: report.Printer{Out: &out, Prefix: "x: "}, Notes: &notes,
		Name: func(k string) string { return "-" + k }}
	if err := job.CheckSidecar(); err != nil {
		t.Fatal(err)
	}
	if err := job.Run(context.Background(), imageio.Sidecar{}); err != nil {
		t.Fatal(err)
	}
	sidecar := imageio.SidecarPath(model)
	saved, err := imageio.LoadSidecar(sidecar)
	if err != nil || saved.Preprocess == nil || saved.Preprocess.ValueScale != pre.ValueScale {
		t.Fatalf("sidecar %+v: %v", saved, err)
	}
	if !strings.Contains(out.String(), "chosen: RGB 0..1, own size") || opened != 2 {
		t.Errorf("out %q (folders opened %d)", out.String(), opened)
	}
	if n := notes.String(); !strings.HasPrefix(n, "x: scoring 1/") || !strings.HasSuffix(n, "x: wrote "+sidecar+" (RGB 0..1, own size)\n") {
		t.Errorf("notes %q", n)
	}
	var ue interface{ ExitCode() int }
	err = job.CheckSidecar()
	if !errors.As(err, &ue) || setting.Rename(err, job.Name).Error() != "-write_sidecar: "+sidecar+" exists; -force replaces it" {
		t.Errorf("existing sidecar: %v", err)
	}
}
