package dual

// The checkpoint of Linear: only TestLinearResumeIdentical reads it back,
// to show that the dual state, the sampler and the score cache resume a
// run bit for bit.

import (
	"encoding/json"
	"errors"
	"slices"
)

type linearJSON struct {
	Config      LinearConfig    `json:"config"`
	Epoch       int             `json:"epoch"`
	Projections int             `json:"projections"`
	W           []float64       `json:"w"`
	WAvg        []float64       `json:"w_avg,omitempty"`
	NAvg        int             `json:"n_avg,omitempty"`
	MW          []float64       `json:"m_w"`
	VW          []float64       `json:"v_w"`
	StepW       int             `json:"step_w"`
	Reg         *Regularizer    `json:"reg"`
	Sampler     *Sampler        `json:"sampler"`
	Cache       json.RawMessage `json:"cache"`
}

// MarshalJSON checkpoints everything except the features.
func (l *Linear) MarshalJSON() ([]byte, error) {
	cache, err := json.Marshal(l.Cache)
	if err != nil {
		return nil, err
	}
	return json.Marshal(linearJSON{
		Config: l.cfg, Epoch: l.Epoch, Projections: l.Projections,
		W: l.W, WAvg: l.WAvg, NAvg: l.nAvg, MW: l.mW, VW: l.vW, StepW: l.stepW,
		Reg: l.Reg, Sampler: l.sampler, Cache: cache,
	})
}

// restoreLinear rebuilds a driver from a checkpoint and the same features
// and classes; continuing it reproduces the uninterrupted run exactly.
func restoreLinear(x [][]float64, classes []int, checkpoint []byte) (*Linear, error) {
	var j linearJSON
	if err := json.Unmarshal(checkpoint, &j); err != nil {
		return nil, err
	}
	l, err := NewLinear(x, classes, j.Config)
	if err != nil {
		return nil, err
	}
	if len(j.W) != len(l.W) || len(j.MW) != len(l.W) || len(j.VW) != len(l.W) || j.Reg == nil || j.Sampler == nil {
		return nil, errors.New("dual: linear checkpoint does not match the features")
	}
	if j.Reg.N() != len(x) || !slices.Equal(j.Reg.class, classes) {
		return nil, errors.New("dual: linear checkpoint has other examples")
	}
	if j.WAvg != nil && len(j.WAvg) != len(l.W) {
		return nil, errors.New("dual: linear checkpoint average does not match")
	}
	copy(l.W, j.W)
	l.WAvg, l.nAvg = j.WAvg, j.NAvg
	copy(l.mW, j.MW)
	copy(l.vW, j.VW)
	l.stepW, l.Epoch, l.Projections = j.StepW, j.Epoch, j.Projections
	l.Reg, l.sampler = j.Reg, j.Sampler
	if err := attachProjectors(l.Reg, l.cfg.Projection); err != nil {
		return nil, err
	}
	if l.Cache, err = l.Reg.RestoreScoreCache(j.Cache); err != nil {
		return nil, err
	}
	return l, nil
}
