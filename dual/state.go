package dual

import (
	"encoding/json"
	"errors"
	"fmt"
)

// stateVersion is bumped when the checkpoint layout or the meaning of a
// stored configuration changes. Version 1 predates Config.Feasibility,
// LambdaInit, DualEvery and LRRel (and the NormMean default): a version-1
// state is restored with the dynamics it was written under (FeasNone, no
// mid-epoch dual steps, its absolute step).
const stateVersion = 2

type termJSON struct {
	Family string    `json:"family"`
	Head   int       `json:"head"`
	Class  int       `json:"class"`
	Tau    []float64 `json:"tau"`
	Lambda []float64 `json:"lambda"`
	Eps    float64   `json:"eps"`
	Mu     float64   `json:"mu"`
	Rho    float64   `json:"rho"`
	MTau   []float64 `json:"m_tau"`
	VTau   []float64 `json:"v_tau"`
	MEps   float64   `json:"m_eps"`
	VEps   float64   `json:"v_eps"`
	// RawTau and RawEps are the free variables of the graph schedule
	// (ProjectThrough); Tau and Eps are then their projection.
	RawTau []float64 `json:"raw_tau,omitempty"`
	RawEps *float64  `json:"raw_eps,omitempty"`
}

type regJSON struct {
	Version int        `json:"version"`
	Config  Config     `json:"config"`
	IDs     []int64    `json:"ids"`
	Classes []int      `json:"classes"`
	Step    int        `json:"step"`
	Terms   []termJSON `json:"terms"`
}

// MarshalJSON writes the whole state: configuration, examples, every
// term's primal, dual and Adam variables, and the Adam step count.
func (r *Regularizer) MarshalJSON() ([]byte, error) {
	j := regJSON{Version: stateVersion, Config: r.cfg, IDs: r.ids, Classes: r.class, Step: r.step}
	for _, t := range r.terms {
		tj := termJSON{
			Family: t.Family.Name(), Head: t.Head, Class: t.Class,
			Tau: t.Tau, Lambda: t.Lambda, Eps: t.Eps, Mu: t.Mu, Rho: t.Rho,
			MTau: t.mTau, VTau: t.vTau, MEps: t.mEps, VEps: t.vEps,
		}
		if th := t.through; th != nil {
			tj.RawTau, tj.RawEps = th.raw, &th.rawEps
		}
		j.Terms = append(j.Terms, tj)
	}
	return json.Marshal(j)
}

// UnmarshalJSON restores a state written by MarshalJSON. The examples and
// term layout are rebuilt from the stored configuration and checked
// against the stored terms.
func (r *Regularizer) UnmarshalJSON(b []byte) error {
	var j regJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	switch j.Version {
	case stateVersion:
	case 1:
		if j.Config.Normalization == "" {
			j.Config.Normalization = NormSum
		}
		j.Config.Feasibility, j.Config.DualEvery = FeasNone, -1
		if j.Config.LR == 0 { // version 1 always stored its step
			j.Config.LR = 1e-2
		}
	default:
		return fmt.Errorf("dual: checkpoint version %d, want %d", j.Version, stateVersion)
	}
	fresh, err := New(j.Config, j.IDs, j.Classes)
	if err != nil {
		return err
	}
	if len(fresh.terms) != len(j.Terms) {
		return errors.New("dual: checkpoint terms do not match its configuration")
	}
	for k, t := range fresh.terms {
		s := j.Terms[k]
		n := len(t.Tau)
		if s.Family != t.Family.Name() || s.Head != t.Head || s.Class != t.Class ||
			len(s.Tau) != n || len(s.Lambda) != n || len(s.MTau) != n || len(s.VTau) != n ||
			(s.RawTau != nil && len(s.RawTau) != n) || (s.RawTau != nil) != (s.RawEps != nil) {
			return fmt.Errorf("dual: checkpoint term %d does not match its configuration", k)
		}
		copy(t.Tau, s.Tau)
		copy(t.Lambda, s.Lambda)
		copy(t.mTau, s.MTau)
		copy(t.vTau, s.VTau)
		t.Eps, t.Mu, t.Rho, t.mEps, t.vEps = s.Eps, s.Mu, s.Rho, s.MEps, s.VEps
		if s.RawTau != nil {
			t.through = &through{raw: append([]float64(nil), s.RawTau...), rawEps: *s.RawEps}
		}
	}
	fresh.step = j.Step
	*r = *fresh
	return nil
}

type cacheJSON struct {
	Scores []float64 `json:"scores"`
	Seen   []bool    `json:"seen"`
}

// RestoreScoreCache rebuilds a cache for r from JSON written by
// json.Marshal(cache).
func (r *Regularizer) RestoreScoreCache(b []byte) (*ScoreCache, error) {
	var j cacheJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, err
	}
	c := r.NewScoreCache()
	if len(j.Scores) != len(c.Scores) || len(j.Seen) != len(c.Seen) {
		return nil, errors.New("dual: score cache checkpoint does not match")
	}
	copy(c.Scores, j.Scores)
	copy(c.Seen, j.Seen)
	return c, nil
}
