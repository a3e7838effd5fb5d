package main

import (
	"reflect"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/models"
	"github.com/segtune/segtune/models/synth"
)

// Each flag of a bound group sets exactly one field of its library's
// config (or one of the command's own values), and no two flags set the
// same one.
func TestBoundFlags(t *testing.T) {
	var (
		net       models.DeepLabConfig
		data      synth.Config
		out, size string
	)
	for _, g := range []struct {
		name  string
		flags []cli.Flag
		cfg   any
		own   []*string
	}{
		{"model new", deepLabFlags(&net, &out), &net, []*string{&out}},
		{"data synth", synthFlags(&data, &out, &size), &data, []*string{&out, &size}},
	} {
		fields := map[uintptr]string{}
		v := reflect.ValueOf(g.cfg).Elem()
		for i := range v.NumField() {
			fields[v.Field(i).Addr().Pointer()] = v.Type().Field(i).Name
		}
		for _, p := range g.own {
			fields[reflect.ValueOf(p).Pointer()] = "its own value"
		}
		seen := map[uintptr]string{}
		for _, f := range g.flags {
			name := f.Names()[0]
			dest := reflect.ValueOf(f).Elem().FieldByName("Destination")
			if !dest.IsValid() || dest.IsNil() {
				t.Errorf("%s --%s: no Destination", g.name, name)
				continue
			}
			p := dest.Pointer()
			field, ok := fields[p]
			if !ok {
				t.Errorf("%s --%s sets no field of %T", g.name, name, g.cfg)
			}
			if other, dup := seen[p]; dup {
				t.Errorf("%s --%s and --%s both set %s", g.name, name, other, field)
			}
			seen[p] = name
		}
	}
}

// unboundCommands still read some flags by name (c.String("…")); each
// conversion removes its command here, and the list ends empty (#42).
var unboundCommands = map[string]bool{}

// Every flag of every command is bound (a Destination, or a Generic value
// that parses into its setting), and no two flags of one command set the
// same value: the action reads settings from structs, never by name.
func TestEveryFlagBound(t *testing.T) {
	app := newApp()
	seenCommands := map[string]bool{}
	var walk func(path string, flags []cli.Flag, cmds []*cli.Command)
	walk = func(path string, flags []cli.Flag, cmds []*cli.Command) {
		seenCommands[path] = true
		unbound := []string{}
		seen := map[uintptr]string{}
		for _, f := range flags {
			name := f.Names()[0]
			if name == "help" || name == "config" && path != "segtune" {
				continue // urfave's own; --config is read before the flags it sets
			}
			v := reflect.ValueOf(f).Elem()
			dest := v.FieldByName("Destination")
			if g, ok := f.(*cli.GenericFlag); ok && g.Destination == nil && g.Value != nil {
				dest = reflect.ValueOf(g.Value)
			}
			if !dest.IsValid() || dest.IsNil() {
				unbound = append(unbound, "--"+name)
				continue
			}
			p := dest.Pointer()
			if other, dup := seen[p]; dup {
				t.Errorf("%s: --%s and --%s set the same value", path, name, other)
			}
			seen[p] = name
		}
		switch {
		case len(unbound) > 0 && !unboundCommands[path]:
			t.Errorf("%s: flags read by name: %v", path, unbound)
		case len(unbound) == 0 && unboundCommands[path]:
			t.Errorf("%s: every flag is bound now; take it off unboundCommands", path)
		}
		for _, c := range cmds {
			walk(path+" "+c.Name, c.Flags, c.Subcommands)
		}
	}
	walk("segtune", app.Flags, app.Commands)
	for path := range unboundCommands {
		if !seenCommands[path] {
			t.Errorf("unboundCommands names %q, which is not a command", path)
		}
	}
}
