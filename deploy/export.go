package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/atomicfile"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/upgrade"
	"github.com/segtune/segtune/runtime"
)

// Plan is one export, decided before any work: the float model, how it is
// fed and read, what it becomes and what it is checked on.
type Plan struct {
	// Source names the exported model or checkpoint (in messages and the
	// report); Model is its float network and Contract how it is read.
	Source   string
	Model    *onnx.Model
	Contract *contract.Contract
	// Upgraded, where set, is Model raised to a newer opset (Opset says
	// how): it is what is converted, and the result is checked against
	// Model.
	Upgraded *onnx.Model
	Opset    *upgrade.Summary
	// Preprocess is how images are fed to both models; Overrides are the
	// settings the exported model's contract is read with.
	Preprocess imageio.Preprocess
	Overrides  contract.Overrides
	// Settings are written into the exported model's metadata_props and
	// beside it as its sidecar.
	Settings imageio.Sidecar
	// Out is the file the model is written to.
	Out string
	// Convert configures the conversion (precision, calibration); its
	// Session configures every session of the export.
	Convert Options
	// Check says what the exported model is compared with the float model
	// on. With no images, the exported model must run and give finite
	// scores on synthetic images.
	Check CheckOptions
	// MinAgreement is the pixel agreement the exported model must reach.
	MinAgreement float64
}

// Exported is a converted and checked model, not yet written.
type Exported struct {
	Report *Report
	Model  *onnx.Model
	// Data is Model serialised, the bytes Write stores.
	Data []byte
	// Unchecked is set when, without check images, the model ran on none
	// of the synthetic images' sizes: only its loading was checked.
	Unchecked bool
	settings  imageio.Sidecar
	out       string
}

// FailedError is an export whose model did not pass its check: nothing
// is written. The Exported beside it carries the report that says why.
type FailedError struct {
	Precision Precision
	Source    string
	Problems  []string
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("the %s export of %s failed its check (%s); nothing written", e.Precision, e.Source, strings.Join(e.Problems, "; "))
}

// Export converts p.Model to p.Convert.Precision and checks the result
// against the float model. It writes nothing: Exported.Write does, once
// the caller has the report. A model that fails its check comes back with
// its report and a *FailedError.
func Export(p Plan) (*Exported, error) {
	floatData, err := p.Model.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Source, err)
	}
	ref, err := inference.Open(floatData, p.Contract, p.Preprocess, p.Convert.Session)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Source, err)
	}
	defer ref.Close()
	src := p.Model
	if p.Upgraded != nil {
		src = p.Upgraded
	}
	conv, err := Convert(src, ref, p.Convert)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Source, err)
	}
	if err := models.EmbedSettings(conv.Model, p.Settings); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Out, err)
	}
	data, err := conv.Model.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", p.Out, err)
	}
	if len(data) > onnx.MaxModelBytes {
		return nil, fmt.Errorf("%s would be %d bytes, more than the protobuf limit of 2 GiB", p.Out, len(data))
	}
	precision := p.Convert.Precision
	rep := &Report{
		Precision: precision, Source: p.Source, Output: p.Out, SourceBytes: len(floatData), OutputBytes: len(data),
		Quantization: conv.Quant, Calibration: conv.Calibration, Float16: conv.Float16, MinAgreement: p.MinAgreement,
		Opset: p.Opset,
	}
	if note := p.Model.WeightInputsNote(); note != "" {
		rep.Notes = append(rep.Notes, note)
	}
	rep.ORTVersion, _ = runtime.Version()
	e := &Exported{Report: rep, Model: conv.Model, Data: data, settings: p.Settings, out: p.Out}
	check := p.Check
	check.Session = p.Convert.Session
	if len(check.Images) == 0 {
		checked, err := CheckRuns(ref, conv.Model, data, p.Overrides, check.Session)
		if err != nil {
			return nil, fmt.Errorf("checking the %s export of %s on %s: %w; nothing written", precision, p.Source, checked, err)
		}
		e.Unchecked = checked == ""
		rep.Passed = true
		return e, nil
	}
	if rep.Check, err = CheckExport(ref, conv.Model, data, p.Overrides, check); err != nil {
		return nil, fmt.Errorf("checking the %s export of %s: %w; nothing written", precision, p.Source, err)
	}
	rep.Evaluate()
	if !rep.Passed {
		return e, &FailedError{Precision: precision, Source: p.Source, Problems: rep.Problems}
	}
	return e, nil
}

// Summary says what Write wrote (its files, the model first): the model,
// its size, inputs and outputs, and the other files.
func (e *Exported) Summary(written []string) string {
	s := e.Model.Summary()
	line := fmt.Sprintf("wrote %s (%s, inputs %s, outputs %s), %s", written[0], mib(len(e.Data)), values(s.Inputs), values(s.Outputs), written[1])
	if len(written) == 4 { // the reports
		line += fmt.Sprintf(", %s and %s", written[2], written[3])
	}
	return line
}

// values lists tensors as "name [dims]".
func values(vs []onnx.Value) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%s [%s]", v.Name, strings.Join(v.Dims, ","))
	}
	return strings.Join(out, ", ")
}

// Write stores the model, its sidecar and, when it was checked on images,
// its JSON and text reports, each atomically. It returns the files
// written, the model first. A model that failed its check is refused.
func (e *Exported) Write() ([]string, error) {
	if !e.Report.Passed {
		return nil, errors.New("writing an export that failed its check")
	}
	if err := atomicfile.Write(e.out, e.Data, 0o644); err != nil {
		return nil, err
	}
	written := []string{e.out, imageio.SidecarPath(e.out)}
	if err := e.settings.Save(written[1]); err != nil {
		return nil, err
	}
	if e.Report.Check == nil {
		return written, nil
	}
	js, err := e.Report.JSON()
	if err != nil {
		return nil, err
	}
	var text bytes.Buffer
	e.Report.WriteText(&text)
	jsonPath, textPath := ReportPaths(e.out)
	if err := atomicfile.Write(jsonPath, js, 0o644); err != nil {
		return nil, err
	}
	if err := atomicfile.Write(textPath, text.Bytes(), 0o644); err != nil {
		return nil, err
	}
	return append(written, jsonPath, textPath), nil
}

// Finish prints e's report on w (as JSON with asJSON) and, when it passed
// its check (checkErr, Export's, nil), writes it (Write) and says in text
// what it wrote. An export that failed is refused naming {min_agreement}.
func (e *Exported) Finish(w io.Writer, asJSON bool, checkErr error) error {
	if asJSON {
		js, err := e.Report.JSON()
		if err != nil {
			return err
		}
		w.Write(js)
	} else {
		e.Report.WriteText(w)
	}
	if checkErr != nil {
		return setting.Messagef("%w ({min_agreement} sets the bar)", checkErr)
	}
	written, err := e.Write()
	if err == nil && !asJSON {
		fmt.Fprintln(w, e.Summary(written))
	}
	return err
}
