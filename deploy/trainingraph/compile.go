// Package trainingraph compiles an inference model file into ONNX training
// artifacts (grad.Build): the training and evaluation graphs, the
// trainable parameters and their manifest, sized for one input shape.
package trainingraph

import (
	"errors"
	"fmt"

	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/models/network"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/resolve"
)

// Spec is a training graph to compile from a model file.
type Spec struct {
	// Model is the inference model's path.
	Model string
	// Trainable selects the parameters to train (network.Trainable's
	// presets and patterns).
	Trainable []string
	// Batch, Height and Width are the training input's fixed size; a
	// segmentation model's fixed size wins unless Given.Size.
	Batch         int
	Height, Width int64
	// Input names the image input; "" reads it from the model's contract,
	// which also sets Loss's output, class axis and kind where Given does
	// not fix them.
	Input string
	Given trainer.Given
	Loss  grad.Loss
	// ExtraOutputs are intermediate tensors exposed as outputs; GradInputs
	// those that receive an extra upstream gradient.
	ExtraOutputs, GradInputs []string
	// Threads are ONNX Runtime's threads for shape probing (0: its
	// default).
	Threads int
	// OnMetadataError, when set, hears that the model's embedded settings
	// are unusable and ignored.
	OnMetadataError func(error)
}

// SpecError is a setting of a Spec the model cannot take: Field is
// "Input" (no such image input), "Contract" (no input given, and the
// model is not a segmentation model whose contract names one) or
// "Trainable".
type SpecError struct {
	Field string
	Err   error
}

func (e *SpecError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *SpecError) Unwrap() error { return e.Err }

// Compiled are the artifacts of a Spec and the input they were compiled
// for.
type Compiled struct {
	*grad.Graphs
	Input trainer.TrainInput
}

// Compile loads s.Model and compiles its training artifacts.
func Compile(s Spec) (*Compiled, error) {
	if s.Batch <= 0 {
		return nil, fmt.Errorf("batch %d: must be positive", s.Batch)
	}
	m, err := onnx.Load(s.Model)
	if err != nil {
		return nil, err
	}
	loss := s.Loss
	in, err := trainInput(s, m, &loss)
	if err != nil {
		return nil, err
	}
	trainable, err := trainer.TrainablePatterns(m, s.Trainable...)
	var quantized *network.QuantizedError
	switch {
	case errors.As(err, &quantized): // the model's doing, whatever --trainable says
		return nil, &SpecError{Field: "Model", Err: err}
	case err != nil:
		return nil, &SpecError{Field: "Trainable", Err: err}
	}
	gs, err := grad.Build(m, grad.Config{
		Prober:       ortprobe.Prober{Threads: s.Threads},
		Trainable:    trainable,
		InputShapes:  map[string][]int64{in.Name: in.Shape},
		Loss:         loss,
		ExtraOutputs: s.ExtraOutputs,
		GradInputs:   s.GradInputs,
	})
	if err != nil {
		return nil, err
	}
	return &Compiled{Graphs: gs, Input: in}, nil
}

// trainInput is the image input the training graph is compiled for:
// s.Input's, or a segmentation model's contract's (read from its settings
// layers: sidecar, metadata_props, registry), which also sets loss.
func trainInput(s Spec, m *onnx.Model, loss *grad.Loss) (trainer.TrainInput, error) {
	if s.Input != "" {
		ti, err := trainer.NamedInput(m, s.Input, int64(s.Batch), s.Height, s.Width)
		if err != nil {
			return ti, &SpecError{Field: "Input", Err: err}
		}
		return ti, nil
	}
	layers, metaErr, err := resolve.Layers(s.Model)
	if err != nil {
		return trainer.TrainInput{}, err
	}
	if metaErr != nil && s.OnMetadataError != nil {
		s.OnMetadataError(metaErr)
	}
	ct, err := resolve.ReadContract(s.Model, m, resolve.Merge(layers))
	if err != nil {
		return trainer.TrainInput{}, &SpecError{Field: "Contract", Err: err}
	}
	return trainer.ContractInput(ct, s.Batch, s.Height, s.Width, s.Given, loss), nil
}

// Summary says what was compiled: the trainable tensors and their values,
// the training graph's nodes, and the batch and size.
func (c *Compiled) Summary() string {
	var values int64
	for _, p := range c.Params {
		if n, err := onnx.NumElements(p.GetDims()); err == nil {
			values += n
		}
	}
	return fmt.Sprintf("%d trainable parameter tensors (%d values), %d training nodes, batch %d at %dx%d",
		len(c.Params), values, len(c.Training.Proto.Graph.Node), c.Input.Shape[0], c.Input.Height, c.Input.Width)
}

// MaxSide is the largest side ParseSize takes.
const MaxSide = 1 << 15

// ParseSize reads a training size as imageio.ParseSize does ("HxW", or
// one number for a square), each side from 1 to MaxSide.
func ParseSize(s string) (h, w int64, err error) {
	hi, wi, err := imageio.ParseSize(s)
	if err != nil {
		return 0, 0, err
	}
	if hi > MaxSide || wi > MaxSide {
		return 0, 0, fmt.Errorf("size %q: each side at most %d", s, MaxSide)
	}
	return int64(hi), int64(wi), nil
}

// ErrLossKind is a loss name ParseLoss does not know.
var ErrLossKind = errors.New("want ce or bce")

// ParseLoss reads a loss name: "ce" (softmax cross entropy) or "bce"
// (sigmoid multi-label).
func ParseLoss(s string) (grad.LossKind, error) {
	switch s {
	case "ce":
		return grad.LossCrossEntropy, nil
	case "bce":
		return grad.LossSigmoidBCE, nil
	}
	return 0, fmt.Errorf("%q: %w", s, ErrLossKind)
}

// IgnoreRange is the ignore label's range: a label, or -1 for none.
var IgnoreRange = setting.Range{Min: -1, Max: 1 << 31, Why: "-1: none"}
