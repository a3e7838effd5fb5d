package history

import (
	"bytes"
	"fmt"
	"image/png"

	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/tfevents"
)

// TensorBoard mirrors records into a TensorBoard event file: each numeric
// field of a record becomes a scalar tagged KIND/FIELD ("step/loss",
// "step/lr", "epoch/val_miou", "epoch/val_iou_person", the regularizer's
// fields…) at the record's step.
type TensorBoard struct{ w *tfevents.Writer }

// OpenTensorBoard starts a new event file in dir. A resumed run passes the
// step it resumes from: TensorBoard then forgets what older files in dir
// hold at or after it, as metrics.jsonl is cut there.
func OpenTensorBoard(dir string, resumeStep int64) (*TensorBoard, error) {
	w, err := tfevents.Create(dir)
	if err != nil {
		return nil, err
	}
	if resumeStep > 0 {
		err := w.Restart(resumeStep)
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			w.Close()
			return nil, err
		}
	}
	return &TensorBoard{w: w}, nil
}

// Write adds r's fields as scalars and flushes, so that a running
// TensorBoard shows them.
func (tb *TensorBoard) Write(r Record) error {
	vals := map[string]float64{}
	for _, f := range r.numbers() {
		vals[r.Kind+"/"+f.name] = f.v
	}
	for name, v := range r.Extra {
		vals[r.Kind+"/"+name] = v
	}
	if err := tb.w.Scalars(r.Step, vals); err != nil {
		return err
	}
	return tb.w.Flush()
}

// Image adds the PNG file at path (a contact sheet) under tag at step.
func (tb *TensorBoard) Image(step int64, tag, path string) error {
	data, err := regfile.ReadSmall(path, 1<<30)
	if err != nil {
		return err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tb.w.Image(step, tag, data, cfg.Width, cfg.Height); err != nil {
		return err
	}
	return tb.w.Flush()
}

// Close closes the event file.
func (tb *TensorBoard) Close() error { return tb.w.Close() }

// Tee makes w also write every record to tb (nil: none); Close closes it.
func (w *Writer) Tee(tb *TensorBoard) { w.tb = tb }
