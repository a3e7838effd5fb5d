// Package synth generates a synthetic semantic-segmentation data set:
// textured RGB images with discs and squares whose sizes span more than two
// orders of magnitude (from ~0.05% to ~25% of the image, log-uniform) —
// the small-and-large-objects setting segtune's size regularizer is about —
// and palette PNG masks of their visible pixels.
//
// Everything is a function of the configuration: image i of a split is
// rendered from its own random stream seeded by (Seed, split, i), so the
// same Config gives byte-identical files whatever the number of workers
// and the order (on one CPU architecture: others may fuse floating-point
// operations differently and move a pixel by one level), and a larger
// Train count adds images without changing the others.
//
// The task is learnable but not trivial: backgrounds are tinted, shaded,
// textured (waves and blotches) and noisy; background distractors
// (elongated ellipses, triangles, rings) come in any colour, including the
// objects'; objects' colours vary around a warm (disc) and a cool (square)
// hue, and some are camouflaged in the background's colour so that only
// their shape gives them away; objects occlude each other, distractors
// occlude objects and the image border cuts them; every image gets a
// global colour jitter and pixel noise. Small objects, a few pixels wide,
// are told apart mainly by colour and are the hard part.
package synth

import (
	"errors"
	"fmt"
	"image"
	"math"
	"math/rand/v2"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/setting"
)

// Class labels in the masks.
const (
	Background = 0
	Disc       = 1
	Square     = 2
	// NumClasses counts them.
	NumClasses = 3
)

// ClassNames names the classes, in label order.
var ClassNames = []string{"background", "disc", "square"}

// Palette colours the masks: black background, red discs, blue squares.
var Palette = imageio.Palette{{0, 0, 0, 255}, {220, 50, 40, 255}, {40, 100, 230, 255}}

// Splits are the splits Generate writes, in order.
var Splits = []string{"train", "val"}

// TrainRange and ValRange are Config.Train and Config.Val as a user gives
// them.
var (
	TrainRange = setting.Range{Min: 1, Max: 1 << 20}
	ValRange   = setting.Range{Min: 0, Max: 1 << 20}
)

// Config describes a data set. Zero fields other than Seed, Train and Val
// take DefaultConfig's values; negative Distractors, Noise or Camouflage
// turn that feature off.
type Config struct {
	Seed uint64 `json:"seed"`
	// Train and Val are the number of images per split.
	Train int `json:"train"`
	Val   int `json:"val"`
	// Height and Width are the image size in pixels.
	Height int `json:"height"`
	Width  int `json:"width"`
	// MinFraction and MaxFraction bound each object's area as a fraction
	// of the image; the fraction is drawn log-uniformly between them.
	MinFraction float64 `json:"min_fraction"`
	MaxFraction float64 `json:"max_fraction"`
	// MaxObjects: each image holds 1..MaxObjects objects (discs and squares).
	MaxObjects int `json:"max_objects"`
	// Distractors: each image holds 0..Distractors background shapes.
	Distractors int `json:"distractors"`
	// Noise is the standard deviation of the per-pixel Gaussian noise, in
	// 0..255 levels.
	Noise float64 `json:"noise"`
	// Camouflage is the probability that an object takes the background's
	// colour instead of its class's.
	Camouflage float64 `json:"camouflage"`
}

// DefaultConfig is 300 training and 100 validation images of 96×128 with
// 1–3 objects of 0.05%–25% of the image each, up to 2 distractors, noise
// 8 and 15% camouflaged objects.
func DefaultConfig() Config {
	return Config{
		Seed: 1, Train: 300, Val: 100, Height: 96, Width: 128,
		MinFraction: 5e-4, MaxFraction: 0.25, MaxObjects: 3, Distractors: 2, Noise: 8, Camouflage: 0.15,
	}
}

// maxSide bounds the image sides, and maxImages the images per split, so a
// typo cannot fill a disk.
const (
	maxSide   = 4096
	maxImages = 1_000_000
)

// Normalized returns c with its defaults filled in, or an error naming the
// first field out of range.
func (c Config) Normalized() (Config, error) {
	d := DefaultConfig()
	if c.Height == 0 {
		c.Height = d.Height
	}
	if c.Width == 0 {
		c.Width = d.Width
	}
	if c.MinFraction == 0 {
		c.MinFraction = d.MinFraction
	}
	if c.MaxFraction == 0 {
		c.MaxFraction = d.MaxFraction
	}
	if c.MaxObjects == 0 {
		c.MaxObjects = d.MaxObjects
	}
	if c.Distractors == 0 {
		c.Distractors = d.Distractors
	} else if c.Distractors < 0 {
		c.Distractors = -1
	}
	if c.Noise == 0 {
		c.Noise = d.Noise
	} else if c.Noise < 0 {
		c.Noise = -1
	}
	if c.Camouflage == 0 {
		c.Camouflage = d.Camouflage
	} else if c.Camouflage < 0 {
		c.Camouflage = -1
	}
	switch {
	case c.Train < 0 || c.Val < 0 || c.Train > maxImages || c.Val > maxImages:
		return c, fmt.Errorf("synth: %d train and %d val images: want 0..%d each", c.Train, c.Val, maxImages)
	case c.Train+c.Val == 0:
		return c, errors.New("synth: no images requested (Train and Val are 0)")
	case c.Height < 8 || c.Width < 8 || c.Height > maxSide || c.Width > maxSide:
		return c, fmt.Errorf("synth: size %dx%d (HxW): want sides in 8..%d", c.Height, c.Width, maxSide)
	case !(c.MinFraction > 0) || !(c.MaxFraction >= c.MinFraction) || c.MaxFraction > 1:
		return c, fmt.Errorf("synth: object fractions %v..%v: want 0 < min <= max <= 1", c.MinFraction, c.MaxFraction)
	case c.MaxObjects < 1 || c.MaxObjects > 64:
		return c, fmt.Errorf("synth: max objects %d: want 1..64", c.MaxObjects)
	case c.Distractors > 64:
		return c, fmt.Errorf("synth: distractors %d: want at most 64", c.Distractors)
	case math.IsNaN(c.Noise) || c.Noise > 128:
		return c, fmt.Errorf("synth: noise %v: want at most 128", c.Noise)
	case math.IsNaN(c.Camouflage) || c.Camouflage > 1:
		return c, fmt.Errorf("synth: camouflage probability %v: want at most 1", c.Camouflage)
	}
	return c, nil
}

// Object is one disc or square as rendered.
type Object struct {
	Class int `json:"class"`
	// X and Y are the centre in pixels (x right, y down); Size is the
	// radius of a disc or the side of a square; Angle the square's
	// rotation in radians.
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	Size  float64 `json:"size"`
	Angle float64 `json:"angle,omitempty"`
	// Fraction is the drawn area as a fraction of the image; Pixels the
	// pixels the mask gives it after occlusion and the image border.
	Fraction float64 `json:"fraction"`
	Pixels   int     `json:"pixels"`
	// Camouflaged objects wear the background's colour.
	Camouflaged bool `json:"camouflaged,omitempty"`
}

// Example is one rendered image with its labels.
type Example struct {
	// Name is the file name stem, e.g. "train_00007".
	Name  string
	Split string
	Image *image.RGBA
	// Labels holds Height×Width class labels in row-major order.
	Labels  []uint8
	Objects []Object
}

// Render draws image index of split ("train" or "val") of the data set c
// describes. It depends on nothing else, so it can be called concurrently
// and in any order.
func Render(c Config, split string, index int) (*Example, error) {
	c, err := c.Normalized()
	if err != nil {
		return nil, err
	}
	sid := -1
	for i, s := range Splits {
		if s == split {
			sid = i
		}
	}
	if sid < 0 {
		return nil, fmt.Errorf("synth: unknown split %q (want train or val)", split)
	}
	if index < 0 {
		return nil, fmt.Errorf("synth: negative image index %d", index)
	}
	r := rand.New(rand.NewPCG(c.Seed, mix(uint64(sid)<<40|uint64(index))))
	cv := newCanvas(c.Width, c.Height)
	bg := cv.background(r)
	shapes := drawShapes(c, r, cv, bg)
	cv.finish(r, c.Noise)

	ex := &Example{Name: fmt.Sprintf("%s_%05d", split, index), Split: split, Image: cv.rgba(), Labels: cv.labels}
	for i, s := range shapes {
		if s.object {
			ex.Objects = append(ex.Objects, Object{
				Class: s.class, X: s.x, Y: s.y, Size: s.size, Angle: s.angle,
				Fraction: s.fraction, Pixels: cv.owned(i), Camouflaged: s.camo,
			})
		}
	}
	return ex, nil
}

// mix is splitmix64's finaliser: it spreads stream numbers over 64 bits.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
