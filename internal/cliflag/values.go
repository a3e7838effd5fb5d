package cliflag

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/segtune/segtune/internal/listflag"
)

// Flag values (cli.Generic) that parse a flag's text straight into a
// library's fields. Each prints "" while unset, so that the help shows no
// default, and implements flag.Getter (Get), which urfave's c.Value
// needs. A value that does not parse is refused while the command line is
// parsed; OneLineUsageErrors reports it as "--flag: why".

// Floats is a comma-separated list of numbers ("0.485,0.456,0.406") read
// into *Dest (listflag.Floats); a blank value is an empty list.
type Floats struct {
	Dest *[]float64
}

// Set implements cli.Generic.
func (f *Floats) Set(v string) error {
	vals, err := listflag.Floats(v)
	if err != nil {
		return err
	}
	*f.Dest = vals
	return nil
}

// String implements cli.Generic: the numbers joined by commas.
func (f *Floats) String() string {
	if f == nil || f.Dest == nil {
		return ""
	}
	parts := make([]string, len(*f.Dest))
	for i, v := range *f.Dest {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// Get implements flag.Getter: the text, as a list flag's range check
// reads it.
func (f *Floats) Get() any { return f.String() }

// Enum is a string flag read into a library's string type *Dest. Norm,
// if set, rewrites the text first (strings.ToUpper, say); Allowed, if
// set, are the only values taken, others are refused naming them. With
// Allowed empty the library validates the value itself (its message).
type Enum[T ~string] struct {
	Dest    *T
	Allowed []T
	Norm    func(string) string
}

// Set implements cli.Generic.
func (e *Enum[T]) Set(v string) error {
	if e.Norm != nil {
		v = e.Norm(v)
	}
	if len(e.Allowed) > 0 && !slices.Contains(e.Allowed, T(v)) {
		want := make([]string, len(e.Allowed))
		for i, a := range e.Allowed {
			want[i] = string(a)
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(want, ", "))
	}
	*e.Dest = T(v)
	return nil
}

// String implements cli.Generic.
func (e *Enum[T]) String() string {
	if e == nil || e.Dest == nil {
		return ""
	}
	return string(*e.Dest)
}

// Get implements flag.Getter.
func (e *Enum[T]) Get() any { return e.String() }
