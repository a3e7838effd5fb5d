package resolve

import (
	"fmt"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
)

// ReadContract reads the contract of m, the model at path, as its
// settings s say to read it, naming the model in errors.
func ReadContract(path string, m *onnx.Model, s imageio.Sidecar) (*contract.Contract, error) {
	ct, err := contract.Read(m, Overrides(s))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ct, nil
}

// Overrides are the parts of a model's settings that change how its
// contract is read (its input layout, how its output is read).
func Overrides(s imageio.Sidecar) contract.Overrides {
	var pre imageio.Preprocess
	if s.Preprocess != nil {
		pre = *s.Preprocess
	}
	var out imageio.OutputSpec
	if s.Output != nil {
		out = *s.Output
	}
	return finetune.ContractOverrides(pre, out)
}
