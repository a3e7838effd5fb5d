package finetune

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/segtune/segtune/finetune/checkpoint"
	"github.com/segtune/segtune/finetune/optim"
	"github.com/segtune/segtune/internal/setting"
)

// EMAPrefix names the moving averages in a checkpoint
// (checkpoint.EMAPrefix).
const EMAPrefix = checkpoint.EMAPrefix

// ema is the exponential moving average of the trained parameters:
// after every optimiser step, avg ← decay·avg + (1 − decay)·param, in
// float32 in one fixed order, so that a resumed run continues it bit for
// bit. It starts at the parameters the run starts from.
type ema struct {
	decay float32
	avg   [][]float32 // in the trainer's params order
}

// CheckEMA checks Config's EMA value, for callers that want the error
// before any other work.
func CheckEMA(decay float64) error {
	if decay != 0 && !(decay > 0 && decay < 1) {
		return &setting.Error{Setting: "ema", Value: strconv.FormatFloat(decay, 'g', -1, 64),
			Err: fmt.Errorf("the decay must be in (0, 1), e.g. 0.999 (0: no average)")}
	}
	return nil
}

func newEMA(decay float64, params []*optim.Param) *ema {
	e := &ema{decay: float32(decay), avg: make([][]float32, len(params))}
	for i, p := range params {
		e.avg[i] = append([]float32(nil), p.Data...)
	}
	return e
}

// update moves the average towards the parameters' current values.
func (e *ema) update(params []*optim.Param) {
	d, w := e.decay, 1-e.decay
	for i, p := range params {
		a := e.avg[i]
		for j, v := range p.Data {
			a[j] = d*a[j] + w*v
		}
	}
}

// tensors are the averages as a checkpoint stores them.
func (e *ema) tensors(params []*optim.Param) []checkpoint.Tensor {
	out := make([]checkpoint.Tensor, len(params))
	for i, p := range params {
		out[i] = checkpoint.Tensor{Name: EMAPrefix + p.Name, Shape: p.Shape, Data: e.avg[i]}
	}
	return out
}

// restore takes the averages from a checkpoint's tensors; every parameter
// must have one.
func (e *ema) restore(params []*optim.Param, ws []checkpoint.Tensor) error {
	byName := map[string][]float32{}
	for _, w := range ws {
		if name, ok := strings.CutPrefix(w.Name, EMAPrefix); ok {
			byName[name] = w.Data
		}
	}
	for i, p := range params {
		d, ok := byName[p.Name]
		if !ok || len(d) != len(p.Data) {
			return fmt.Errorf("the checkpoint has no moving average of %q that fits it (a run with EMA saves one for every trained tensor)", p.Name)
		}
		copy(e.avg[i], d)
	}
	return nil
}
