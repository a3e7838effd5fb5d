package deploy

import (
	"fmt"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/upgrade"
)

// int8Opset is the opset an int8 export of an older model is raised to:
// QuantizeLinear and DequantizeLinear need 10, per-channel weight scales
// 13.
const int8Opset = 13

// int8MinOpset is the oldest opset a QDQ model can be written at.
const int8MinOpset = 10

// ExportOpset is the opset an export of a model of opset have is written
// at: asked (0: the model's own), raised to int8Opset for an int8 export
// of a model older than QDQ. An asked opset an int8 export cannot be
// written at is refused.
func ExportOpset(have, asked int64, precision Precision) (int64, error) {
	if asked != 0 {
		if precision == INT8 && asked < int8MinOpset {
			return 0, fmt.Errorf("opset %d: an int8 export needs opset %d or later (QuantizeLinear and DequantizeLinear)", asked, int8MinOpset)
		}
		return asked, upgrade.CheckTarget(have, asked)
	}
	if precision == INT8 && have < int8MinOpset {
		return int8Opset, nil
	}
	return have, nil
}

// upgradeFor raises m to the opset its export is written at, before any
// calibration or check: an operator the upgrade cannot carry is named
// here. It returns nil, nil when m stays at its own opset.
func upgradeFor(m *onnx.Model, asked int64, precision Precision) (*onnx.Model, *upgrade.Summary, error) {
	have := m.Opset("")
	to, err := ExportOpset(have, asked, precision)
	if err != nil || to == have {
		return nil, nil, err
	}
	up, sum, err := upgrade.Upgrade(m, to)
	switch {
	case err == nil:
		return up, sum, nil
	case asked == 0:
		return nil, nil, fmt.Errorf("an int8 export needs opset %d or later, and the model imports opset %d: %w; export it in fp32 or fp16 instead", int8MinOpset, have, err)
	}
	return nil, nil, fmt.Errorf("%w; export it at its own opset %d instead", err, have)
}
