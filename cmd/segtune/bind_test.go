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
