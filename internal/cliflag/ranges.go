package cliflag

import (
	"github.com/segtune/segtune/internal/listflag"
	"github.com/segtune/segtune/internal/setting"
	"github.com/urfave/cli/v2"
)

// CheckRanges checks every numeric flag of c's command that ranges gives a
// Range for (by flag name), defaults included: a NaN, an infinity or a
// value out of range is a *setting.Error keyed by the flag's name.
func CheckRanges(c *cli.Context, ranges func(name string) (setting.Range, bool)) error {
	if c.Command == nil {
		return nil
	}
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		r, ok := ranges(name)
		if !ok {
			continue
		}
		vals, isInt, err := numbers(c.Value(name), r.List)
		if err != nil {
			return &setting.Error{Setting: name, Err: err}
		}
		for _, v := range vals {
			if err := r.Check(name, v, isInt); err != nil {
				return err
			}
		}
	}
	return nil
}

// numbers are the numeric values of a flag's value, and whether its type
// is an integer: none for a type that holds none (or a string, unless
// list).
func numbers(value any, list bool) ([]float64, bool, error) {
	switch v := value.(type) {
	case int:
		return []float64{float64(v)}, true, nil
	case int64:
		return []float64{float64(v)}, true, nil
	case float64:
		return []float64{v}, false, nil
	case string:
		if !list {
			return nil, false, nil
		}
		vals, err := listflag.Floats(v)
		return vals, false, err
	}
	return nil, false, nil
}
