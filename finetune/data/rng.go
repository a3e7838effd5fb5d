package data

import (
	"math/bits"
	"math/rand/v2"
)

// Stream tags keep the generators of different purposes independent even
// for equal (seed, epoch, position).
const (
	streamOrder   = 0x6f72646572 // "order"
	streamExample = 0x6578616d70 // "examp"
)

// splitmix64 is the finaliser of SplitMix64: a bijective mixer whose
// outputs for consecutive inputs are uncorrelated.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hashSeed folds values into one 64-bit seed.
func hashSeed(vals ...uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, v := range vals {
		h = splitmix64(h ^ v)
	}
	return h
}

// rng is a PCG generator with the few draws the package needs, written
// out here so results depend only on PCG's specified output and not on
// how a Go release implements IntN, Float64 or Shuffle.
type rng struct{ pcg rand.PCG }

// newRNG returns the generator for (seed, stream, epoch, position).
func newRNG(seed, stream uint64, epoch, pos int) *rng {
	a := hashSeed(seed, stream, uint64(epoch), uint64(pos))
	r := &rng{}
	r.pcg.Seed(a, splitmix64(a^stream))
	return r
}

// intn returns a uniform int in [0, n) for n > 0 (Lemire's method).
func (r *rng) intn(n int) int {
	bound := uint64(n)
	hi, lo := bits.Mul64(r.pcg.Uint64(), bound)
	if lo < bound {
		thresh := -bound % bound
		for lo < thresh {
			hi, lo = bits.Mul64(r.pcg.Uint64(), bound)
		}
	}
	return int(hi)
}

// float64 returns a uniform float in [0, 1).
func (r *rng) float64() float64 { return float64(r.pcg.Uint64()>>11) * (1.0 / (1 << 53)) }

// permutation returns a seeded shuffle of 0..n-1 (Fisher–Yates).
func permutation(seed uint64, epoch, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r := newRNG(seed, streamOrder, epoch, 0)
	for i := n - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}
