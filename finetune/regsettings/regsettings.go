// Package regsettings turns the size regularizer's settings as a user
// gives them (lists as text, switches) into a fine-tuning run's
// configuration.
package regsettings

import (
	"github.com/segtune/segtune/dual"
	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/setting"
)

// SharesRange is each number of the lists Grid and SizeBins: shares (of
// an image's pixels, or rates of the AUC's grid).
var SharesRange = setting.Range{Min: 0, Max: 1, List: true}

// Settings are the size regularizer's settings as a user gives
// them: the regularizer (the run's when Alpha > 0) and the size groups,
// and the text and switches Apply turns into a run's configuration.
type Settings struct {
	Reg                               finetune.RegularizerConfig
	Size                              finetune.SizeSpec
	Normalization, Feasibility        string
	Grid, SizeClasses, SizeBins, View string
	Balance, NoBalance                bool
}

// Apply sets cfg's size groups, sampling, training view and, with Alpha,
// its regularizer; a list that does not parse is an error naming its key.
func (r *Settings) Apply(cfg *finetune.Config) error {
	var err error
	cfg.Size = r.Size
	if cfg.Size.Classes, err = listflag.Ints(r.SizeClasses); err != nil {
		return setting.Messagef("{size_classes}: %w", err)
	}
	if cfg.Size.Bins, err = listflag.Floats(r.SizeBins); err != nil {
		return setting.Messagef("{size_bins}: %w", err)
	}
	reg := r.Reg
	if reg.Dual.Grid, err = listflag.Floats(r.Grid); err != nil {
		return setting.Messagef("{grid}: %w", err)
	}
	for _, list := range []struct {
		key  string
		vals []float64
	}{{"size_bins", cfg.Size.Bins}, {"grid", reg.Dual.Grid}} {
		for _, v := range list.vals {
			if err := SharesRange.Check(list.key, v, false); err != nil {
				return err
			}
		}
	}
	reg.Dual.Normalization, reg.Dual.Feasibility = dual.Normalization(r.Normalization), dual.Feasibility(r.Feasibility)
	return cfg.ApplyRegularizer(reg, r.Balance, r.NoBalance, r.View)
}
