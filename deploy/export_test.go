package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/onnx"
)

// exportPlan is an fp16 export of segtune-synth checked on synthSetup's
// validation images, written into a fresh folder.
func exportPlan(t *testing.T) Plan {
	m, ref, _, co := synthSetup(t)
	_, entry := synthModel(t)
	return Plan{
		Source: "segtune-synth", Model: m, Contract: ref.Contract, Preprocess: entry.Preprocess,
		Settings: imageio.Sidecar{Preprocess: &entry.Preprocess, Classes: entry.Classes},
		Out:      filepath.Join(t.TempDir(), "out.onnx"),
		Convert:  Options{Precision: FP16, Session: co.Session},
		Check:    co, MinAgreement: 0.99,
	}
}

// TestExportWritesWhatPassed: a passing export writes the model carrying
// its settings, its sidecar and both reports, and nothing before Write.
func TestExportWritesWhatPassed(t *testing.T) {
	p := exportPlan(t)
	e, err := Export(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.Out); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Export wrote %s before Write: %v", p.Out, err)
	}
	if !e.Report.Passed || e.Report.Check == nil || e.Report.Check.Images != len(p.Check.Images) {
		t.Fatalf("report: passed %v, check %+v", e.Report.Passed, e.Report.Check)
	}
	written, err := e.Write()
	if err != nil {
		t.Fatal(err)
	}
	jsonPath, textPath := ReportPaths(p.Out)
	want := []string{p.Out, imageio.SidecarPath(p.Out), jsonPath, textPath}
	if len(written) != len(want) {
		t.Fatalf("wrote %v, want %v", written, want)
	}
	for i, w := range want {
		if written[i] != w {
			t.Fatalf("wrote %v, want %v", written, want)
		}
		if st, err := os.Stat(w); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", w, err)
		}
	}
	sum := e.Summary(written)
	if !strings.HasPrefix(sum, "wrote "+p.Out+" (") || !strings.Contains(sum, " MiB, inputs ") ||
		!strings.HasSuffix(sum, "), "+written[1]+", "+jsonPath+" and "+textPath) {
		t.Errorf("summary %q", sum)
	}
	data, err := os.ReadFile(p.Out)
	if err != nil || string(data) != string(e.Data) {
		t.Fatalf("%s holds other bytes than Exported.Data (%v)", p.Out, err)
	}
	s, found, err := models.EmbeddedSettings(p.Out)
	if err != nil || !found || len(s.Classes) != len(p.Settings.Classes) {
		t.Fatalf("settings in metadata_props: %+v found %v err %v", s, found, err)
	}
}

// TestExportBelowTheBarIsRefused: an agreement bar no model reaches gives
// the report, a *FailedError naming the problem, and no file.
func TestExportBelowTheBarIsRefused(t *testing.T) {
	p := exportPlan(t)
	p.MinAgreement = 1.5
	e, err := Export(p)
	var failed *FailedError
	if !errors.As(err, &failed) || e == nil || e.Report.Passed || len(failed.Problems) == 0 {
		t.Fatalf("Export = %v, %v; want a report and a *FailedError", e, err)
	}
	if _, err := e.Write(); err == nil {
		t.Fatal("Write wrote an export that failed its check")
	}
	if entries, _ := os.ReadDir(filepath.Dir(p.Out)); len(entries) != 0 {
		t.Fatalf("files written after a failed check: %v", entries)
	}
}

// The exported model carries the model's settings with the request's
// classes, label map and ignore label, which the check reads masks with;
// an ignore label no mask can hold is refused as the request's Settings.
func TestPlanSettings(t *testing.T) {
	m, entry := synthModel(t)
	settings := entry.Sidecar()
	p := &Prepared{Request: Request{Source: "synth.onnx", Out: "o.onnx", Precision: FP32}}
	plan, err := p.Plan(m, settings)
	if err != nil || plan.Check.Ignore != 255 || len(plan.Settings.Classes) != len(entry.Classes) {
		t.Fatalf("no overrides: ignore %d, settings %+v, %v", plan.Check.Ignore, plan.Settings, err)
	}
	ignore := 7
	lm, err := imageio.ParseLabelMap("1:0;*:1")
	if err != nil {
		t.Fatal(err)
	}
	p.ClassNames, p.LabelMap, p.IgnoreLabel = []string{"a", "b"}, lm, &ignore
	plan, err = p.Plan(m, settings)
	if err != nil || plan.Check.Ignore != 7 || plan.Check.LabelMap != lm || strings.Join(plan.Check.Names, ",") != "a,b" ||
		*plan.Settings.IgnoreLabel != 7 || plan.Settings.LabelMap != lm {
		t.Fatalf("overrides: %+v, %v", plan.Check, err)
	}
	ignore = 1 << 20
	var re *RequestError
	if _, err := p.Plan(m, settings); !errors.As(err, &re) || re.Field != "Settings" {
		t.Errorf("ignore label %d: %v", ignore, err)
	}
}

// An int8 export of a model that is quantized already is refused before
// the calibration (a hostile round saw it fail after 73 s), naming the
// quantized operators.
func TestPlanRefusesQuantizingAQuantizedModel(t *testing.T) {
	m, entry := synthModel(t)
	g := m.Proto.Graph
	g.Node = append([]*onnx.NodeProto{{OpType: proto.String("DequantizeLinear"), Name: proto.String("dq"),
		Input: []string{"wq", "s"}, Output: []string{"w_unused"}}}, g.Node...)
	p := &Prepared{Request: Request{Source: "synth.onnx", Out: "o.onnx", Precision: INT8}}
	var re *RequestError
	if _, err := p.Plan(m, entry.Sidecar()); !errors.As(err, &re) || re.Field != "Precision" || !strings.Contains(err.Error(), "DequantizeLinear ×1") {
		t.Fatalf("Plan: %v, want a Precision RequestError naming DequantizeLinear", err)
	}
	p.Precision = FP16
	if _, err := p.Plan(m, entry.Sidecar()); errors.As(err, &re) && re.Field == "Precision" {
		t.Fatalf("an fp16 export of a QDQ model was refused: %v", err)
	}
}
