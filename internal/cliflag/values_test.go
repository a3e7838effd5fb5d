package cliflag

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/setting"
)

func TestFloats(t *testing.T) {
	var v []float64
	f := &Floats{Dest: &v}
	if err := f.Set("0.485, 0.456,0.406"); err != nil || !slices.Equal(v, []float64{0.485, 0.456, 0.406}) {
		t.Errorf("Set: %v %v", err, v)
	}
	if f.String() != "0.485,0.456,0.406" || f.Get() != "0.485,0.456,0.406" {
		t.Errorf("String %q, Get %v", f.String(), f.Get())
	}
	if err := f.Set("1,x"); err == nil || err.Error() != `"x" is not a number` {
		t.Errorf("1,x: %v", err)
	}
	if !slices.Equal(v, []float64{0.485, 0.456, 0.406}) {
		t.Errorf("a refused list changed the value to %v", v)
	}
}

type policy string

func TestEnum(t *testing.T) {
	var p policy
	e := &Enum[policy]{Dest: &p, Allowed: []policy{"A", "B"}, Norm: strings.ToUpper}
	if err := e.Set("b"); err != nil || p != "B" || e.String() != "B" {
		t.Errorf("b: %v %q", err, p)
	}
	if err := e.Set("c"); err == nil || err.Error() != `"C" is not one of A, B` || p != "B" {
		t.Errorf("c: %v, value %q", err, p)
	}
	open := &Enum[policy]{Dest: &p} // no list: the library checks
	if err := open.Set("anything"); err != nil || p != "anything" {
		t.Errorf("open enum: %v %q", err, p)
	}
}

// A flag that does not parse is named as typed (--flag), whatever kind
// of error it is; a Generic value's message comes as "--flag: message",
// a library's setting error named by the flag.
func TestUsageErrorsNameTheFlag(t *testing.T) {
	var n int
	var v []float64
	flags := []cli.Flag{
		&cli.IntFlag{Name: "count", Destination: &n},
		&cli.BoolFlag{Name: "on"},
		&cli.GenericFlag{Name: "mean", Value: &Floats{Dest: &v}},
		&cli.GenericFlag{Name: "keyed", Value: keyedValue{}},
	}
	install := func(cmd *cli.Command) { cmd.OnUsageError = oneLineUsageError("app cmd") }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--count", "x"}, `invalid value "x" for flag --count: parse error (app cmd --help lists its flags)`},
		{[]string{"--on", "--nosuch"}, `flag provided but not defined: --nosuch (app cmd --help lists its flags)`},
		{[]string{"--count"}, `flag needs an argument: --count (app cmd --help lists its flags)`},
		{[]string{"--count=3", "-mean", "1,y"}, `--mean: "y" is not a number`},
		{[]string{"--keyed", "v"}, `--keyed "v": is refused`},
	} {
		_, err := run(t, flags, install, tc.args...)
		var exit cli.ExitCoder
		if err == nil || err.Error() != tc.want || !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: %v, want %q with status 2", tc.args, err, tc.want)
		}
	}
	if pe := FindParseError(flags, []string{"--count", "1", "rest", "--nosuch"}); pe != nil {
		t.Errorf("flags end at the first argument: %v", pe)
	}
}

// keyedValue refuses every value with a library's error keyed "some_key".
type keyedValue struct{}

func (keyedValue) Set(v string) error {
	return &setting.Error{Setting: "some_key", Value: `"` + v + `"`, Err: errors.New("is refused")}
}
func (keyedValue) String() string { return "" }

// The app's own flags are named as typed too when it runs through Run,
// which keeps the arguments urfave does not.
func TestAppUsageErrorsThroughRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"app", "--limit"}, "flag needs an argument: --limit (app --help lists its flags)"},
		{[]string{"app", "--nosuch", "cmd"}, "flag provided but not defined: --nosuch (app --help lists its flags)"},
	} {
		app := &cli.App{Name: "app", Flags: []cli.Flag{&cli.StringFlag{Name: "limit"}}, ExitErrHandler: func(*cli.Context, error) {},
			Commands: []*cli.Command{{Name: "cmd", Action: func(*cli.Context) error { return nil }}}}
		OneLineUsageErrors(app)
		if err := Run(app, tc.args); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
