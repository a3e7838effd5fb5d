package inference

import (
	"errors"
	"fmt"

	"github.com/segtune/segtune/imageio"
)

// DefaultOverlap is the overlap of tiles when none is given.
const DefaultOverlap = 0.25

// The settings ParseDense reads, as a *DenseSettingError names them.
const (
	DenseTile    = "tile"
	DenseOverlap = "overlap"
	DenseTTA     = "tta"
)

// errNeedsTile refuses an overlap given without tiles.
var errNeedsTile = errors.New("needs " + DenseTile)

// DenseSettingError is a dense setting ParseDense refuses: Setting is
// DenseTile, DenseOverlap or DenseTTA, Value the text given (for TTA).
type DenseSettingError struct {
	Setting, Value string
	Err            error
}

func (e *DenseSettingError) Error() string { return e.Named(func(s string) string { return s }) }

func (e *DenseSettingError) Unwrap() error { return e.Err }

// Named is the message with each setting called by name(setting), for a
// program whose users set them under other names (flags).
func (e *DenseSettingError) Named(name func(setting string) string) string {
	switch {
	case e.Err == errNeedsTile:
		return name(DenseOverlap) + ": needs " + name(DenseTile)
	case e.Setting == DenseTTA:
		return fmt.Sprintf("%s %q: %v", name(e.Setting), e.Value, e.Err)
	}
	return name(e.Setting) + ": " + e.Err.Error()
}

// ParseDense reads dense inference written as a user gives it: tile as
// "HxW" (or N for N×N; "" for whole images), overlap (nil:
// DefaultOverlap; given without a tile it is refused) and tta as ParseTTA
// reads it. It returns nil when neither tiles nor TTA are asked for, and
// validates the rest before any model is opened; errors are
// *DenseSettingError.
func ParseDense(tile string, overlap *float64, tta string) (*Dense, error) {
	if tile == "" && overlap != nil {
		return nil, &DenseSettingError{Setting: DenseOverlap, Err: errNeedsTile}
	}
	if tile == "" && tta == "" {
		return nil, nil
	}
	d := &Dense{}
	if tile != "" {
		h, w, err := imageio.ParseSize(tile)
		if err == nil {
			d.TileHeight, d.TileWidth = h, w
			err = d.Validate()
		}
		if err != nil {
			return nil, &DenseSettingError{Setting: DenseTile, Value: tile, Err: err}
		}
	}
	d.Overlap = DefaultOverlap
	if overlap != nil {
		d.Overlap = *overlap
	}
	if err := d.Validate(); err != nil {
		return nil, &DenseSettingError{Setting: DenseOverlap, Value: fmt.Sprint(d.Overlap), Err: err}
	}
	if err := d.ParseTTA(tta); err != nil {
		return nil, &DenseSettingError{Setting: DenseTTA, Value: tta, Err: err}
	}
	return d, nil
}
