package trainingraph

import (
	"errors"

	"github.com/segtune/segtune/finetune/trainer"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/onnx/grad"
)

// Request is a Spec as its user writes it (segtune artifacts): the size
// and loss by name, the logits and their class axis, the ignore label
// (-1: none), class weights as a list and the loss-scale input.
type Request struct {
	Spec
	Size, Logits, Loss, ClassWeights string
	ClassAxis                        int
	Ignore                           int64
	LossScale                        bool
}

// Parse is the Spec r describes, its size and loss read; errors name the
// setting by key.
func (r Request) Parse() (Spec, error) {
	s := r.Spec
	var err error
	if s.Height, s.Width, err = ParseSize(r.Size); err != nil {
		return s, setting.Messagef("{size}: %w", err)
	}
	s.Loss = grad.Loss{Output: r.Logits, ClassAxis: r.ClassAxis, Scale: r.LossScale}
	if s.Loss.Kind, err = ParseLoss(r.Loss); err != nil {
		return s, setting.Messagef("{loss} %w", err)
	}
	if ign := r.Ignore; ign < 0 {
		s.Loss.NoIgnore = true
	} else {
		s.Loss.IgnoreIndex = &ign
	}
	if r.ClassWeights != "" {
		if s.Loss.ClassWeights, err = grad.ParseClassWeights(r.ClassWeights); err != nil {
			return s, setting.Messagef("{class_weights}: %w", err)
		}
	}
	return s, nil
}

// Compile compiles the artifacts r describes (Parse, then Compile),
// the size, logits, class axis and loss kind fixed where given says
// (by key) that the user gave them rather than left them to the model's
// contract. A setting that cannot be read, or that the model cannot take
// (*SpecError), is a usage error (setting.Usage).
func (r Request) Compile(given func(key string) bool) (*Compiled, error) {
	s, err := r.Parse()
	if err != nil {
		return nil, setting.Usage(err)
	}
	s.Given = trainer.Given{Size: given("size"), Output: given("logits"), ClassAxis: given("class_axis"), Kind: given("loss")}
	compiled, err := Compile(s)
	if se := (*SpecError)(nil); errors.As(err, &se) {
		return nil, setting.Usage(err)
	}
	return compiled, err
}

// Named is the error with the settings it names called name(key): a
// trainable selection the model does not have, or an image input a model
// without a contract needs named.
func (e *SpecError) Named(name func(key string) string) string {
	switch e.Field {
	case "Trainable":
		return setting.Sprintf(name, "{trainable}: %s", e.Err)
	case "Contract":
		return setting.Sprintf(name, "%s (name the image input with {input} for other models)", e.Err)
	}
	return e.Err.Error()
}
