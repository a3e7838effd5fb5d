package imageio

import (
	"errors"
	"math"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

func TestPreprocessCheckRanges(t *testing.T) {
	good := Preprocess{ScaleFactor: 0.5, MultipleOf: 8, ValueScale: 1.0 / 127.5, ValueOffset: -1, Mean: []float64{0.4, -2}, Std: []float64{0.2}}
	if err := good.CheckRanges(); err != nil {
		t.Fatalf("%+v: %v", good, err)
	}
	for key, edit := range map[string]func(*Preprocess){
		"scale_factor": func(p *Preprocess) { p.ScaleFactor = -1 },
		"multiple_of":  func(p *Preprocess) { p.MultipleOf = 1<<12 + 1 },
		"value_scale":  func(p *Preprocess) { p.ValueScale = math.NaN() },
		"value_offset": func(p *Preprocess) { p.ValueOffset = math.Inf(1) },
		"mean":         func(p *Preprocess) { p.Mean = []float64{1, math.NaN()} },
		"std":          func(p *Preprocess) { p.Std = []float64{0.2, 0} },
	} {
		p := good
		edit(&p)
		var se *setting.Error
		if err := p.CheckRanges(); !errors.As(err, &se) || se.Setting != key {
			t.Errorf("%s: %v, want a setting error of %s", key, err, key)
		}
	}
	var se *setting.Error
	if err := (OverlayOptions{Alpha: 1.5}).Validate(); !errors.As(err, &se) || se.Setting != "overlay_alpha" {
		t.Errorf("alpha 1.5: %v", err)
	}
	if err := (OverlayOptions{Alpha: 0.5}).Validate(); err != nil {
		t.Errorf("alpha 0.5: %v", err)
	}
}
