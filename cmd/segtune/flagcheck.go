package main

import (
	"fmt"
	"math"
	goruntime "runtime"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/memlimit"
)

// numRange is the valid range of a numeric flag: [Min, Max], with
// MinOpen excluding Min itself; Zero also allows 0 (meaning "default").
type numRange struct {
	Min, Max float64
	MinOpen  bool
	Zero     bool
	// List marks a string flag holding comma-separated numbers.
	List bool
	// Why is appended to the error (e.g. "0: one per core").
	Why string
}

// maxThreads bounds --threads: ONNX Runtime crashes on absurd counts, and
// more than a few threads per core only slows it down.
func maxThreads() int { return max(16, 4*goruntime.NumCPU()) }

// flagRanges are the valid values of segtune's numeric flags, by flag
// name; commandRanges override them where one name means different things
// in different commands (keyed "command flag").
func flagRanges() map[string]numRange {
	inf := math.Inf(1)
	return map[string]numRange{
		"threads":         {Min: 1, Max: float64(maxThreads()), Zero: true, Why: "0 picks one per core"},
		"batch":           {Min: 1, Max: 1 << 16},
		"epochs":          {Min: 0, Max: 1 << 24},
		"patience":        {Min: 0, Max: 1 << 24},
		"steps":           {Min: 0, Max: 1 << 40},
		"lr":              {Min: 0, MinOpen: true, Max: 10},
		"momentum":        {Min: 0, Max: 1, Why: "SGD momentum is in [0, 1]"},
		"weight-decay":    {Min: 0, Max: inf},
		"scale-min":       {Min: 0, MinOpen: true, Max: 100},
		"scale-max":       {Min: 0, MinOpen: true, Max: 100},
		"ignore":          {Min: 0, Max: 65535, Why: "mask labels are 0..65535"},
		"classes":         {Min: 1, Max: 65536, Zero: true, Why: "0 keeps the model's classifier"},
		"alpha":           {Min: 0, Max: inf},
		"overlay-alpha":   {Min: 0, Max: 1, Why: "the overlay opacity"},
		"beta":            {Min: 0, MinOpen: true, Max: 1},
		"level":           {Min: 0, Max: 1},
		"dual-lr":         {Min: 0, MinOpen: true, Max: inf, Zero: true, Why: "0: 0.03/n"},
		"lambda-init":     {Min: 0, Max: inf},
		"score-bound":     {Min: 0, Max: inf, Why: "0: unbounded"},
		"dual-every":      {Min: -1, Max: 1 << 40, Why: "0: four an epoch; -1: epoch ends only"},
		"c-lambda":        {Min: 0, Max: inf},
		"c-mu":            {Min: 0, Max: inf},
		"size-threshold":  {Min: 0, Max: 1, Why: "a fraction of the image"},
		"scale":           {Min: 0, MinOpen: true, Max: 64, Zero: true},
		"multiple-of":     {Min: 0, Max: 1 << 12},
		"value-scale":     {Min: -inf, Max: inf},
		"value-offset":    {Min: -inf, Max: inf},
		"width":           {Min: 0, MinOpen: true, Max: 16},
		"output-stride":   {Min: 8, Max: 16},
		"train":           {Min: 1, Max: 1 << 20},
		"val":             {Min: 0, Max: 1 << 20},
		"classes-ignore":  {Min: -1, Max: 1 << 31, Why: "-1: none"},
		"grid":            {Min: 0, Max: 1, List: true},
		"size-bins":       {Min: 0, Max: 1, List: true},
		"mean":            {Min: -inf, Max: inf, List: true},
		"std":             {Min: 0, MinOpen: true, Max: inf, List: true},
		"calibrate-count": {Min: 1, Max: 1 << 20, Zero: true, Why: "0 takes every image"},
		"check-count":     {Min: 1, Max: 1 << 20, Zero: true, Why: "0 takes every image"},
		"percentile":      {Min: 0, MinOpen: true, Max: 100},
		"min-agreement":   {Min: 0, Max: 1, Why: "a share of pixels"},
	}
}

var commandRanges = map[string]numRange{
	"new classes": {Min: 2, Max: 65536},
}

// checkNumericFlags validates every numeric flag the command defines,
// defaults included, before the command does any work: a NaN, an infinity
// or a value out of range is an error naming the flag.
func checkNumericFlags(c *cli.Context) error {
	memlimit.Set(0)
	if v := c.String("max-memory"); v != "" {
		n, err := memlimit.ParseBytes(v)
		if err != nil {
			return cli.Exit("--max-memory: "+err.Error(), 2)
		}
		memlimit.Set(n)
	}
	memlimit.SetGoLimit()
	memlimit.FitAddressSpace()
	if c.Command == nil {
		return nil
	}
	ranges := flagRanges()
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		r, ok := commandRanges[c.Command.Name+" "+name]
		if !ok {
			if r, ok = ranges[name]; !ok {
				continue
			}
		}
		var vals []float64
		var isInt bool
		switch v := c.Value(name).(type) {
		case int:
			vals, isInt = []float64{float64(v)}, true
		case int64:
			vals, isInt = []float64{float64(v)}, true
		case float64:
			vals = []float64{v}
		case string:
			if !r.List || strings.TrimSpace(v) == "" {
				continue
			}
			for _, s := range strings.Split(v, ",") {
				x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
				if err != nil {
					return cli.Exit(fmt.Sprintf("--%s: %q is not a number", name, s), 2)
				}
				vals = append(vals, x)
			}
		default:
			continue
		}
		for _, v := range vals {
			if err := r.check(name, v, isInt); err != nil {
				return cli.Exit(err.Error(), 2)
			}
		}
	}
	return nil
}

func (r numRange) check(name string, v float64, isInt bool) error {
	if math.IsNaN(v) {
		return fmt.Errorf("--%s: NaN is not a valid value", name)
	}
	if v == 0 && r.Zero {
		return nil
	}
	// No flag takes an infinity.
	if !math.IsInf(v, 0) && v <= r.Max && (v > r.Min || !r.MinOpen && v == r.Min) {
		return nil
	}
	num := func(x float64) string {
		if isInt {
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	var want string
	switch {
	case math.IsInf(r.Min, -1) && math.IsInf(r.Max, 1):
		want = "a finite number"
	case math.IsInf(r.Max, 1) && r.MinOpen:
		want = "greater than " + num(r.Min)
	case math.IsInf(r.Max, 1):
		want = "at least " + num(r.Min)
	case r.MinOpen:
		want = fmt.Sprintf("in (%s, %s]", num(r.Min), num(r.Max))
	default:
		want = fmt.Sprintf("from %s to %s", num(r.Min), num(r.Max))
	}
	if r.Zero {
		want += ", or 0"
	}
	if r.Why != "" {
		want += " (" + r.Why + ")"
	}
	return fmt.Errorf("--%s %s: must be %s", name, num(v), want)
}

// installFlagChecks makes every command (and subcommand) validate its
// numeric flags first.
func installFlagChecks(cmds []*cli.Command) {
	for _, cmd := range cmds {
		installFlagChecks(cmd.Subcommands)
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if err := checkNumericFlags(c); err != nil {
				return err
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
}
