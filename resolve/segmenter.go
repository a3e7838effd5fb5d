package resolve

import (
	"errors"
	"fmt"
	"io"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/runtime"
)

// SegmenterOptions say how OpenSegmenter opens a model.
type SegmenterOptions struct {
	Session runtime.Options
	// Dense, if set, switches the segmenter to tiling and TTA; a model that
	// cannot take it is refused with an error wrapping inference.ErrDense,
	// naming the settings tile and tta.
	Dense *inference.Dense
	// LabelsOnly, without Dense, opens the model with inference.OpenLabels:
	// its arg-max inside the graph where that gives the same labels.
	LabelsOnly bool
	// Notes, if set, is told what a user should know of the model before
	// it runs (a one-channel head read as two classes).
	Notes io.Writer
}

// OpenSegmenter loads the model at path (a model file or a checkpoint,
// checked, its external data resolved inside its folder), reads its
// contract as its settings say and opens a session on it, preprocessing
// as settings.Preprocess (not nil) says. The segmenter's Name is path;
// errors name it.
func OpenSegmenter(path string, settings imageio.Sidecar, o SegmenterOptions) (*inference.Segmenter, error) {
	m, _, err := Load(path)
	if err != nil {
		return nil, err
	}
	ct, err := ReadContract(path, m, settings)
	if err != nil {
		return nil, err
	}
	if note := ct.BinaryNote(); note != "" && o.Notes != nil {
		fmt.Fprintf(o.Notes, "segtune: %s: %s\n", path, note)
	}
	data, err := m.Marshal()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	open := inference.Open
	if o.LabelsOnly && o.Dense == nil {
		open = inference.OpenLabels
	}
	seg, err := open(data, ct, *settings.Preprocess, o.Session)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seg.Name = path
	if err := seg.SetDense(o.Dense); err != nil {
		seg.Close()
		if errors.Is(err, inference.ErrDense) {
			return nil, setting.Messagef("{tile}/{tta}: %w", err)
		}
		return nil, err
	}
	return seg, nil
}
