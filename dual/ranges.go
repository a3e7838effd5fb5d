package dual

import (
	"math"

	"github.com/segtune/segtune/internal/setting"
)

// Ranges are the valid values of Config's numbers as a user gives them,
// by setting key (the step size for τ and ε is dual_lr, beside the
// network's lr); CheckRanges refuses others.
var Ranges = map[string]setting.Range{
	"beta":        {Min: 0, MinOpen: true, Max: 1},
	"level":       {Min: 0, Max: 1},
	"dual_lr":     {Min: 0, MinOpen: true, Max: math.Inf(1), Zero: true, Why: "0: 0.03/n"},
	"lambda_init": {Min: 0, Max: math.Inf(1)},
	"dual_every":  {Min: -1, Max: 1 << 40, Why: "0: four an epoch; -1: epoch ends only"},
	"c_lambda":    {Min: 0, Max: math.Inf(1)},
	"c_mu":        {Min: 0, Max: math.Inf(1)},
}

// CheckRanges refuses a number of c out of its range (Ranges), a NaN or
// an infinity with a *setting.Error keyed as Ranges is.
func (c Config) CheckRanges() error {
	return setting.CheckAll(Ranges, []setting.Number{
		{Key: "beta", V: c.Beta}, {Key: "level", V: c.Level}, {Key: "dual_lr", V: c.LR}, {Key: "lambda_init", V: c.LambdaInit},
		{Key: "dual_every", V: float64(c.DualEvery), Int: true}, {Key: "c_lambda", V: c.CLambda}, {Key: "c_mu", V: c.CMu},
	})
}
