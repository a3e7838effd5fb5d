package cliflag

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/setting"
)

// run runs one command named "cmd" of an app named "app" with args, after
// install has set it up, and returns the error and the context the action
// saw.
func run(t *testing.T, flags []cli.Flag, install func(*cli.Command), args ...string) (*cli.Context, error) {
	t.Helper()
	var seen *cli.Context
	cmd := &cli.Command{Name: "cmd", Flags: flags, Action: func(c *cli.Context) error { seen = c; return nil }}
	if install != nil {
		install(cmd)
	}
	app := &cli.App{Name: "app", Commands: []*cli.Command{cmd}, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.Run(append([]string{"app", "cmd"}, args...))
	return seen, err
}

func TestBeforeRunsLastInstalledFirst(t *testing.T) {
	var order []string
	hook := func(name string) cli.BeforeFunc {
		return func(*cli.Context) error { order = append(order, name); return nil }
	}
	_, err := run(t, nil, func(cmd *cli.Command) {
		cmd.Before = hook("own")
		Before(cmd, hook("first installed"))
		Before(cmd, hook("last installed"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"last installed", "first installed", "own"}; !slices.Equal(order, want) {
		t.Fatalf("hooks ran in order %q, want %q", order, want)
	}
}

func TestApplySetsUnsetFlagsOnly(t *testing.T) {
	flags := []cli.Flag{
		&cli.Float64Flag{Name: "lr"}, &cli.StringFlag{Name: "mean"},
		&cli.StringSliceFlag{Name: "tag"}, &cli.IntFlag{Name: "batch"}, &cli.StringFlag{Name: "config"},
	}
	settings, err := ParseFile("f.yaml", []byte("lr: 3e-4\nmean: [0.5, 0.25, 1]\ntag: [a, b]\nbatch: 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := run(t, flags, func(cmd *cli.Command) {
		Before(cmd, func(c *cli.Context) error { return Apply(c, settings, "config") })
	}, "--batch", "2")
	if err != nil {
		t.Fatal(err)
	}
	if c.Float64("lr") != 3e-4 || c.String("mean") != "0.5,0.25,1" || c.Int("batch") != 2 ||
		!slices.Equal(c.StringSlice("tag"), []string{"a", "b"}) {
		t.Fatalf("lr %v mean %q batch %d tag %q", c.Float64("lr"), c.String("mean"), c.Int("batch"), c.StringSlice("tag"))
	}
}

func TestApplyRefuses(t *testing.T) {
	flags := []cli.Flag{&cli.IntFlag{Name: "batch", Aliases: []string{"b"}}, &cli.StringFlag{Name: "config"}}
	for file, want := range map[string]string{
		"learning-rate: 1":   `"learning-rate" is not a flag of app cmd (see app cmd --help)`,
		"config: other.yaml": `"config" is not a flag of app cmd`,
		"batch: many":        `batch "many": `,
		"batch: {a: 1}":      "batch: a mapping of 1 key is not a flag value",
		"batch: [[1, 2]]":    "batch: a list of 2 values nested in the list is not a flag value",
		"b: 2\nbatch: 3":     `"b" and "batch" name the same flag: give one`,
		"batch:":             "batch: no value",
	} {
		settings, err := ParseFile("f.yaml", []byte(file))
		if err != nil {
			t.Fatal(err)
		}
		_, err = run(t, flags, func(cmd *cli.Command) {
			Before(cmd, func(c *cli.Context) error { return Apply(c, settings, "config") })
		})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", file, err, want)
		}
	}
	for _, bad := range []string{"", "- a\n- b\n", "a: [1\n", "batch: 2\n---\nbatch: 3\n", "batch: 2\n---\n- x\n"} {
		if _, err := ParseFile("f.yaml", []byte(bad)); err == nil || !strings.HasPrefix(err.Error(), "f.yaml: ") {
			t.Errorf("ParseFile(%q): error %v, want one naming f.yaml", bad, err)
		}
	}
}

func TestUnrequireThenRequire(t *testing.T) {
	flags := []cli.Flag{&cli.StringFlag{Name: "out", Required: true}, &cli.StringFlag{Name: "model", Required: true}, &cli.StringFlag{Name: "x"}}
	names := Unrequire(flags)
	if !slices.Equal(names, []string{"out", "model"}) {
		t.Fatalf("Unrequire = %q", names)
	}
	_, err := run(t, flags, func(cmd *cli.Command) {
		Before(cmd, func(c *cli.Context) error { return Require(c, names...) })
	}, "--out", "o")
	if err == nil || err.Error() != `Required flag "model" not set` {
		t.Fatalf("error %v, want the parser's message for model", err)
	}
	_, err = run(t, flags, func(cmd *cli.Command) {
		Before(cmd, func(c *cli.Context) error { return Require(c, names...) })
	})
	if err == nil || err.Error() != `Required flags "out, model" not set` {
		t.Fatalf("error %v, want the parser's message for both", err)
	}
}

func TestCheckRanges(t *testing.T) {
	ranges := map[string]setting.Range{"batch": {Min: 1, Max: 8}, "std": {Min: 0, MinOpen: true, Max: math.Inf(1), List: true}}
	lookup := func(name string) (setting.Range, bool) { r, ok := ranges[name]; return r, ok }
	flags := func() []cli.Flag {
		return []cli.Flag{&cli.IntFlag{Name: "batch", Value: 1}, &cli.StringFlag{Name: "std"}, &cli.IntFlag{Name: "free", Value: -5}}
	}
	check := func(cmd *cli.Command) { Before(cmd, func(c *cli.Context) error { return CheckRanges(c, lookup) }) }
	for args, want := range map[string]string{
		"":                  "",
		"--std 0.2,0.3":     "",
		"--batch 9":         "batch 9: must be from 1 to 8",
		"--std 0.2,0":       "std 0: must be greater than 0",
		"--std 0.2,x":       `std: "x" is not a number`,
		"--batch 0 --std 1": "batch 0: must be from 1 to 8",
	} {
		_, err := run(t, flags(), check, strings.Fields(args)...)
		var se *setting.Error
		if err != nil && !errors.As(err, &se) {
			t.Errorf("%q: %v is no *setting.Error", args, err)
		}
		if got := ""; err != nil {
			got = err.Error()
			if got != want {
				t.Errorf("%q: %q, want %q", args, got, want)
			}
		} else if want != "" {
			t.Errorf("%q passed, want %q", args, want)
		}
	}
}

func TestFileURLsToPaths(t *testing.T) {
	flags := func() []cli.Flag { return []cli.Flag{&cli.StringFlag{Name: "out"}, &cli.StringFlag{Name: "data"}} }
	install := func(cmd *cli.Command) { Before(cmd, FileURLsToPaths) }
	c, err := run(t, flags(), install, "--out", "file:///tmp/a%20b", "--data", "s3://bucket/x")
	if err != nil {
		t.Fatal(err)
	}
	if c.String("out") != "/tmp/a b" || c.String("data") != "s3://bucket/x" {
		t.Fatalf("out %q data %q", c.String("out"), c.String("data"))
	}
	_, err = run(t, flags(), install, "--out", "file://host/x")
	if err == nil || !strings.HasPrefix(err.Error(), "--out file://host/x: ") {
		t.Fatalf("a remote file URL: error %v, want one naming --out", err)
	}
}

// TestApplyErrorsAreShort: a value that is a large nested mapping is named
// by its kind, not printed (a hostile round found 21–35 KB errors).
func TestApplyErrorsAreShort(t *testing.T) {
	var b strings.Builder
	b.WriteString("batch:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "  key%d: [1, 2, 3]\n", i)
	}
	settings, err := ParseFile("f.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = run(t, []cli.Flag{&cli.IntFlag{Name: "batch"}}, func(cmd *cli.Command) {
		Before(cmd, func(c *cli.Context) error { return Apply(c, settings, "config") })
	})
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error of %d bytes: %.300v", len(fmt.Sprint(err)), err)
	}
	// A file with thousands of faults gets the first few named.
	b.Reset()
	for range 2000 {
		b.WriteString("batch: 1\n")
	}
	if _, err := ParseFile("f.yaml", []byte(b.String())); err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), "more") {
		t.Fatalf("error of %d bytes: %.500v", len(fmt.Sprint(err)), err)
	}
}
