package inference_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
)

func TestParseDense(t *testing.T) {
	half := 0.5
	one := 1.0
	flag := func(s string) string { return "--val-" + s }
	for _, c := range []struct {
		name, tile, tta string
		overlap         *float64
		want            *inference.Dense
		setting, named  string
	}{
		{name: "nothing asked", want: nil},
		{name: "tile", tile: "64x32", want: &inference.Dense{TileHeight: 64, TileWidth: 32, Overlap: inference.DefaultOverlap}},
		{name: "square tile, overlap", tile: "48", overlap: &half, want: &inference.Dense{TileHeight: 48, TileWidth: 48, Overlap: 0.5}},
		{name: "tta alone", tta: "flip,scales=0.5,1", want: &inference.Dense{Overlap: inference.DefaultOverlap, Flip: true, Scales: []float64{0.5, 1}}},
		{name: "overlap without tile", overlap: &half, setting: inference.DenseOverlap, named: "--val-overlap: needs --val-tile"},
		{name: "bad tile", tile: "big", setting: inference.DenseTile,
			named: `--val-tile: size "big": want HxW with positive integers, e.g. 513x513`},
		{name: "huge tile", tile: "40000x8", setting: inference.DenseTile,
			named: "--val-tile: invalid tiling or test-time augmentation: tile 40000x8 (HxW) is larger than 32768"},
		{name: "overlap of 1", tile: "8", overlap: &one, setting: inference.DenseOverlap,
			named: "--val-overlap: invalid tiling or test-time augmentation: overlap 1 is not in [0, 1)"},
		{name: "bad tta", tta: "mirror", setting: inference.DenseTTA, named: `--val-tta "mirror": "mirror" is neither flip nor scales=…`},
		{name: "tta scale too large", tta: "scales=9", setting: inference.DenseTTA,
			named: `--val-tta "scales=9": invalid tiling or test-time augmentation: scale 9 is not in (0, 4]`},
	} {
		d, err := inference.ParseDense(c.tile, c.overlap, c.tta)
		if c.setting == "" {
			if err != nil || !reflect.DeepEqual(d, c.want) {
				t.Errorf("%s: ParseDense = %+v, %v; want %+v", c.name, d, err, c.want)
			}
			continue
		}
		var se *setting.Error
		if !errors.As(err, &se) || se.Setting != c.setting || d != nil {
			t.Errorf("%s: ParseDense = %+v, %v; want a *setting.Error about %s", c.name, d, err, c.setting)
			continue
		}
		if got := se.Named(flag); got != c.named {
			t.Errorf("%s: named %q; want %q", c.name, got, c.named)
		}
	}
}

// A DenseRequest counts its overlap once given, and leads its settings'
// keys with its prefix (finetune's val_tile …).
func TestDenseRequest(t *testing.T) {
	flag := func(key string) string { return "--" + key }
	r := inference.DenseRequest{Overlap: 0.5, Prefix: "val_"}
	if d, err := r.Parse(); d != nil || err != nil {
		t.Errorf("an overlap not given: %+v, %v; want no dense inference", d, err)
	}
	r.OverlapGiven = true
	if _, err := r.Parse(); err == nil || setting.Rename(err, flag).Error() != "--val_overlap: needs --val_tile" {
		t.Errorf("an overlap given alone: %v", err)
	}
	r.Tile, r.TTA = "8x4", "flip"
	if d, err := r.Parse(); err != nil || d.TileHeight != 8 || d.TileWidth != 4 || d.Overlap != 0.5 || !d.Flip {
		t.Errorf("%+v, %v", d, err)
	}
	if _, err := (inference.DenseRequest{TTA: "mirror"}).Parse(); err == nil || setting.Rename(err, flag).Error() != `--tta "mirror": "mirror" is neither flip nor scales=…` {
		t.Errorf("no prefix: %v", err)
	}
}
