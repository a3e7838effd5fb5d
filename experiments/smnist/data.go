package smnist

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Side is the image side (MNIST images are 28×28).
const Side = 28

// Pixels is the number of pixels of one image.
const Pixels = Side * Side

// Set is a labelled set of 28×28 grey images stored as bytes (0 = black
// background), row-major, image after image.
type Set struct {
	Pixels []byte
	Labels []int
	// Doubled marks the examples of S-MNIST's rescaled copy (nil for plain
	// MNIST).
	Doubled []bool
}

// Len is the number of examples.
func (s *Set) Len() int { return len(s.Labels) }

// Image returns example i's pixels (shared, not copied).
func (s *Set) Image(i int) []byte { return s.Pixels[i*Pixels : (i+1)*Pixels] }

// Head returns the first n examples (all when n ≤ 0 or n ≥ Len), sharing
// storage.
func (s *Set) Head(n int) *Set {
	if n <= 0 || n >= s.Len() {
		return s
	}
	out := &Set{Pixels: s.Pixels[:n*Pixels], Labels: s.Labels[:n]}
	if s.Doubled != nil {
		out.Doubled = s.Doubled[:n]
	}
	return out
}

// Foreground is the paper's size s′: the number of pixels with a nonzero
// intensity.
func Foreground(img []byte) int {
	n := 0
	for _, v := range img {
		if v != 0 {
			n++
		}
	}
	return n
}

// Rescale returns img with its foreground scaled by factor (linear, in
// both directions) about the foreground's centre of mass, by bilinear
// interpolation, rounded to bytes and cropped to 28×28.
func Rescale(img []byte, factor float64) []byte {
	var sum, cx, cy float64
	for y := range Side {
		for x := range Side {
			v := float64(img[y*Side+x])
			sum += v
			cx += v * float64(x)
			cy += v * float64(y)
		}
	}
	out := make([]byte, Pixels)
	if sum == 0 {
		return out
	}
	cx, cy = cx/sum, cy/sum
	at := func(x, y int) float64 {
		if x < 0 || y < 0 || x >= Side || y >= Side {
			return 0
		}
		return float64(img[y*Side+x])
	}
	for y := range Side {
		for x := range Side {
			sx := cx + (float64(x)-cx)/factor
			sy := cy + (float64(y)-cy)/factor
			x0, y0 := int(math.Floor(sx)), int(math.Floor(sy))
			fx, fy := sx-float64(x0), sy-float64(y0)
			v := (1-fx)*(1-fy)*at(x0, y0) + fx*(1-fy)*at(x0+1, y0) +
				(1-fx)*fy*at(x0, y0+1) + fx*fy*at(x0+1, y0+1)
			out[y*Side+x] = byte(math.Min(255, math.Round(v)))
		}
	}
	return out
}

// DefaultScale is the linear factor of S-MNIST's rescaled copy: √2, so
// that the foreground's area — the paper's size s′, a pixel count — is
// double the original ("the foreground is double the original size").
var DefaultScale = math.Sqrt2

// SMNIST returns S-MNIST built from an MNIST set: the originals followed by
// a copy of every image with its foreground rescaled by scale (≤ 0 means
// DefaultScale), labels preserved.
func SMNIST(mnist *Set, scale float64) *Set {
	if scale <= 0 {
		scale = DefaultScale
	}
	n := mnist.Len()
	out := &Set{
		Pixels:  make([]byte, 0, 2*n*Pixels),
		Labels:  make([]int, 0, 2*n),
		Doubled: make([]bool, 2*n),
	}
	out.Pixels = append(out.Pixels, mnist.Pixels[:n*Pixels]...)
	for i := range n {
		out.Pixels = append(out.Pixels, Rescale(mnist.Image(i), scale)...)
		out.Doubled[n+i] = true
	}
	out.Labels = append(append(out.Labels, mnist.Labels...), mnist.Labels...)
	return out
}

// Sizes returns every example's foreground size s′.
func (s *Set) Sizes() []int {
	out := make([]int, s.Len())
	for i := range out {
		out[i] = Foreground(s.Image(i))
	}
	return out
}

// MeanSize is the mean of sizes.
func MeanSize(sizes []int) float64 {
	t := 0.0
	for _, v := range sizes {
		t += float64(v)
	}
	return t / float64(max(1, len(sizes)))
}

// SizeClasses thresholds sizes at mean: 1 (S+) above it, 0 otherwise.
func SizeClasses(sizes []int, mean float64) []int {
	out := make([]int, len(sizes))
	for i, v := range sizes {
		if float64(v) > mean {
			out[i] = 1
		}
	}
	return out
}

// Synthetic returns n digit-like images for tests and for machines without
// MNIST: ten fixed stroke templates (one per class, a few thick line
// segments inside the central 20×20 box, as MNIST's digits are), each
// example its class's template shifted by up to 2 pixels, with jittered
// stroke ends and intensities. Deterministic given seed.
func Synthetic(n int, seed uint64) *Set {
	tr := rand.New(rand.NewPCG(0x5eed, 0xd161))
	type seg struct{ x0, y0, x1, y1 float64 }
	templates := make([][]seg, 10)
	for c := range templates {
		k := 2 + tr.IntN(3)
		for range k {
			templates[c] = append(templates[c], seg{
				6 + 16*tr.Float64(), 6 + 16*tr.Float64(),
				6 + 16*tr.Float64(), 6 + 16*tr.Float64(),
			})
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x5e7))
	s := &Set{Pixels: make([]byte, n*Pixels), Labels: make([]int, n)}
	for i := range n {
		c := r.IntN(10)
		s.Labels[i] = c
		dx, dy := float64(r.IntN(5)-2), float64(r.IntN(5)-2)
		img := s.Pixels[i*Pixels : (i+1)*Pixels]
		for _, sg := range templates[c] {
			j := func() float64 { return r.Float64()*2 - 1 }
			x0, y0 := sg.x0+dx+j(), sg.y0+dy+j()
			x1, y1 := sg.x1+dx+j(), sg.y1+dy+j()
			ink := 180 + 75*r.Float64()
			steps := int(math.Hypot(x1-x0, y1-y0)*2) + 1
			for t := 0; t <= steps; t++ {
				f := float64(t) / float64(steps)
				px, py := x0+f*(x1-x0), y0+f*(y1-y0)
				for yy := int(py) - 1; yy <= int(py)+1; yy++ {
					for xx := int(px) - 1; xx <= int(px)+1; xx++ {
						if xx < 0 || yy < 0 || xx >= Side || yy >= Side {
							continue
						}
						d := math.Hypot(float64(xx)+0.5-px, float64(yy)+0.5-py)
						v := ink * math.Max(0, 1-d/1.6)
						if p := &img[yy*Side+xx]; v > float64(*p) {
							*p = byte(v)
						}
					}
				}
			}
		}
	}
	return s
}

// check validates a set's internal lengths.
func (s *Set) check(name string) error {
	if len(s.Pixels) != s.Len()*Pixels || (s.Doubled != nil && len(s.Doubled) != s.Len()) {
		return fmt.Errorf("smnist: %s set: %d labels, %d pixels, %d doubled flags", name, s.Len(), len(s.Pixels), len(s.Doubled))
	}
	return nil
}
