package optim

import (
	"fmt"
	"slices"
)

// State is an optimiser's mutable state: the step count and the moment
// buffers of every parameter. It is what a checkpoint stores so that a
// resumed run continues bit for bit as if it had never stopped.
type State struct {
	Algorithm Algorithm
	Step      int64
	Buffers   []Buffer
}

// Buffer is one state tensor of one parameter, such as Adam's exp_avg.
type Buffer struct {
	Param string // the parameter's name
	Slot  string // SlotMomentum, SlotExpAvg or SlotExpAvgSq
	Data  []float32
}

// State returns a deep copy of the optimiser's state, in parameter order
// and then slot order. The copy does not alias the optimiser, so it can be
// written out while training continues.
func (o *Optimizer) State() *State {
	s := &State{Algorithm: o.cfg.Algorithm, Step: o.step}
	names := SlotNames(o.cfg)
	for i, p := range o.params {
		n := len(p.Data)
		for j, slot := range names {
			s.Buffers = append(s.Buffers, Buffer{
				Param: p.Name,
				Slot:  slot,
				Data:  slices.Clone(o.slots[i][j*n : (j+1)*n]),
			})
		}
	}
	return s
}

// SetState replaces the optimiser's state with a copy of s. The algorithm
// must match, and s must hold exactly one buffer of the right length for
// every slot of every parameter (in any order); otherwise SetState returns
// an error naming the mismatch and leaves the optimiser unchanged.
func (o *Optimizer) SetState(s *State) error {
	bufs, err := s.ForParams(o.cfg, o.params)
	if err != nil {
		return err
	}
	for i, p := range o.params {
		n := len(p.Data)
		for j, b := range bufs[i] {
			copy(o.slots[i][j*n:(j+1)*n], b)
		}
	}
	o.step = s.Step
	return nil
}

// ForParams checks s against an optimiser of cfg over params — the
// algorithm, a non-negative step count, exactly one buffer of the
// parameter's length for each of its slots — and returns each parameter's
// buffers (aliasing s) in SlotNames order, for optimisers that keep their
// state elsewhere (an optgraph on a device).
func (s *State) ForParams(cfg Config, params []*Param) ([][][]float32, error) {
	if s == nil {
		return nil, fmt.Errorf("optim: nil state")
	}
	if s.Algorithm != cfg.Algorithm {
		return nil, fmt.Errorf("optim: state is for %q, optimiser is %q", s.Algorithm, cfg.Algorithm)
	}
	if s.Step < 0 {
		return nil, fmt.Errorf("optim: state has negative step count %d", s.Step)
	}
	type key struct{ param, slot string }
	byKey := make(map[key][]float32, len(s.Buffers))
	for _, b := range s.Buffers {
		k := key{b.Param, b.Slot}
		if _, dup := byKey[k]; dup {
			return nil, fmt.Errorf("optim: state holds %s of %q twice", b.Slot, b.Param)
		}
		byKey[k] = b.Data
	}
	names := SlotNames(cfg)
	out := make([][][]float32, len(params))
	for i, p := range params {
		for _, slot := range names {
			d, ok := byKey[key{p.Name, slot}]
			if !ok {
				return nil, fmt.Errorf("optim: state lacks %s of %q", slot, p.Name)
			}
			if len(d) != len(p.Data) {
				return nil, fmt.Errorf("optim: state's %s of %q has %d values, parameter has %d", slot, p.Name, len(d), len(p.Data))
			}
			out[i] = append(out[i], d)
		}
	}
	if want := len(names) * len(params); len(byKey) != want {
		return nil, fmt.Errorf("optim: state holds %d buffers, optimiser has %d (parameters not in this model?)", len(byKey), want)
	}
	return out, nil
}
