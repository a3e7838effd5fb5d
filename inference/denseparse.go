package inference

import (
	"errors"
	"strconv"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// DefaultOverlap is the overlap of tiles when none is given.
const DefaultOverlap = 0.25

// The settings ParseDense reads, as its *setting.Error names them.
const (
	DenseTile    = "tile"
	DenseOverlap = "overlap"
	DenseTTA     = "tta"
)

// DenseRequest is dense inference as a user gives it (ParseDense): Overlap
// counts once OverlapGiven. Prefix leads its settings' keys where a
// program has a second set ("val_" for a validation's: val_tile …).
type DenseRequest struct {
	Tile, TTA    string
	Overlap      float64
	OverlapGiven bool
	Prefix       string
}

// Parse is ParseDense of r, the keys of its *setting.Error led by
// r.Prefix.
func (r DenseRequest) Parse() (*Dense, error) {
	var overlap *float64
	if r.OverlapGiven {
		overlap = &r.Overlap
	}
	d, err := ParseDense(r.Tile, overlap, r.TTA)
	var se *setting.Error
	if errors.As(err, &se) && r.Prefix != "" {
		se.Setting = r.Prefix + se.Setting
		if se.Needs != "" {
			se.Needs = r.Prefix + se.Needs
		}
	}
	return d, err
}

// ParseDense reads dense inference written as a user gives it: tile as
// "HxW" (or N for N×N; "" for whole images), overlap (nil:
// DefaultOverlap; given without a tile it is refused) and tta as ParseTTA
// reads it. It returns nil when neither tiles nor TTA are asked for, and
// validates the rest before any model is opened; errors are
// *setting.Error of DenseTile, DenseOverlap or DenseTTA.
func ParseDense(tile string, overlap *float64, tta string) (*Dense, error) {
	if tile == "" && overlap != nil {
		return nil, &setting.Error{Setting: DenseOverlap, Needs: DenseTile}
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
			return nil, &setting.Error{Setting: DenseTile, Err: err}
		}
	}
	d.Overlap = DefaultOverlap
	if overlap != nil {
		d.Overlap = *overlap
	}
	if err := d.Validate(); err != nil {
		return nil, &setting.Error{Setting: DenseOverlap, Err: err}
	}
	if err := d.ParseTTA(tta); err != nil {
		return nil, &setting.Error{Setting: DenseTTA, Value: strconv.Quote(tta), Err: err}
	}
	return d, nil
}
