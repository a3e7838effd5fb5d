package datalayout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func namedSamples(names ...string) []Sample {
	out := make([]Sample, len(names))
	for i, n := range names {
		out[i] = Sample{Name: n, Image: n + ".jpg"}
	}
	return out
}

func namesOf(samples []Sample) []string {
	var out []string
	for _, s := range samples {
		out = append(out, s.Name)
	}
	return out
}

// Divide holds out the fraction asked, the same samples for the same
// seed, other samples for another seed, and every sample on one side.
func TestValSplitDivide(t *testing.T) {
	var names []string
	for i := range 50 {
		names = append(names, fmt.Sprintf("img%02d", i))
	}
	samples := namedSamples(names...)
	vs := ValSplit{Fraction: 0.2, Seed: 1}
	train, val, err := vs.Divide(samples)
	if err != nil {
		t.Fatal(err)
	}
	if len(val) != 10 || len(train) != 40 {
		t.Fatalf("held out %d, kept %d; want 10 and 40", len(val), len(train))
	}
	both := append(namesOf(train), namesOf(val)...)
	slices.Sort(both)
	if !slices.Equal(both, names) {
		t.Errorf("the sides together are %v, not every sample once", both)
	}
	if !slices.IsSorted(namesOf(val)) || slices.Equal(namesOf(val), names[:10]) || slices.Equal(namesOf(val), names[40:]) {
		t.Errorf("held out %v: want a sorted draw, not the first or last names", namesOf(val))
	}
	_, again, _ := vs.Divide(slices.Clone(samples))
	if !slices.Equal(namesOf(again), namesOf(val)) {
		t.Errorf("the same seed held out %v, then %v", namesOf(val), namesOf(again))
	}
	vs.Seed = 2
	if _, other, _ := vs.Divide(samples); slices.Equal(namesOf(other), namesOf(val)) {
		t.Errorf("seeds 1 and 2 held out the same %v", namesOf(val))
	}
}

// Grouped by folder or by name prefix, a sequence's frames are all on one
// side.
func TestValSplitGroups(t *testing.T) {
	var names []string
	for _, seq := range []string{"a", "b", "c", "d", "e"} {
		for f := range 4 {
			names = append(names, fmt.Sprintf("%s/seq%s_%04d", seq, seq, f), fmt.Sprintf("flat/%s-%03d", seq, f))
		}
	}
	samples := namedSamples(names...)
	group := map[string]func(string) string{ // written out here, not with Group
		"folder": func(n string) string { return n[:strings.Index(n, "/")] },
		"prefix": func(n string) string { return n[:strings.LastIndexAny(n, "_-")] },
	}
	for _, by := range []string{"folder", "prefix"} {
		vs := ValSplit{Fraction: 0.3, Seed: 5, By: by}
		train, val, err := vs.Divide(samples)
		if err != nil {
			t.Fatal(by, err)
		}
		if len(val) == 0 || len(train) == 0 {
			t.Fatalf("by %s: %d held out, %d kept", by, len(val), len(train))
		}
		side := map[string]bool{}
		for _, s := range val {
			side[group[by](s.Name)] = true
		}
		for _, s := range train {
			if side[group[by](s.Name)] {
				t.Errorf("by %s: group %s of %s is on both sides", by, group[by](s.Name), s.Name)
			}
		}
	}
	if g := (ValSplit{By: "prefix"}).Group("x/seq01_000120"); g != "x/seq01" {
		t.Errorf("prefix group of x/seq01_000120 = %q, want x/seq01", g)
	}
	if g := (ValSplit{By: "prefix"}).Group("000120"); g != "000120" {
		t.Errorf("prefix group of a number = %q, want the number itself", g)
	}
}

// Settings and data that cannot be split are refused with the reason.
func TestValSplitRefuses(t *testing.T) {
	for _, vs := range []ValSplit{{Fraction: 0}, {Fraction: 1}, {Fraction: -0.1}, {Fraction: 0.2, By: "day"}} {
		if err := vs.Check(); err == nil {
			t.Errorf("%+v accepted", vs)
		}
	}
	_, _, err := ValSplit{Fraction: 0.5, By: "folder"}.Divide(namedSamples("s/a", "s/b", "s/c"))
	if err == nil || !strings.Contains(err.Error(), "3 samples in 1 group") {
		t.Errorf("one folder: %v", err)
	}
	// A tiny fraction still holds one sample out; a large one keeps one.
	if train, val, err := (ValSplit{Fraction: 0.01}).Divide(namedSamples("a", "b", "c")); err != nil || len(val) != 1 || len(train) != 2 {
		t.Errorf("fraction 0.01 of 3: %d/%d, %v", len(train), len(val), err)
	}
	if train, val, err := (ValSplit{Fraction: 0.99}).Divide(namedSamples("a", "b", "c")); err != nil || len(val) != 2 || len(train) != 1 {
		t.Errorf("fraction 0.99 of 3: %d/%d, %v", len(train), len(val), err)
	}
}
