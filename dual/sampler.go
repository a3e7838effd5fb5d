package dual

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
)

// Sampler draws minibatches stratified by size class: about B/p examples
// of each of the p classes (≈ B/2 each of S+ and S− for binary size, as in
// the paper), without replacement within a pass over a class, each class
// reshuffled when it runs out. It is deterministic given the seed, and its
// state is a few integers per class (the permutation of pass q of class c
// is regenerated from (seed, c, q)), so it serialises compactly and resumes
// exactly.
type Sampler struct {
	seed   uint64
	batch  int
	strata [][]int64
	pass   []int
	pos    []int
	perm   [][]int64 // current pass's order, derived
	next   int       // class that receives the first remainder slot
}

// NewSampler returns a sampler over ids grouped by classes, drawing batch
// examples per call to Next.
func NewSampler(ids []int64, classes []int, batch int, seed uint64) (*Sampler, error) {
	if len(ids) != len(classes) {
		return nil, errors.New("dual: NewSampler: len(ids) != len(classes)")
	}
	if batch < 1 || len(ids) == 0 {
		return nil, errors.New("dual: NewSampler: empty data or batch < 1")
	}
	p := 0
	for _, c := range classes {
		if c < 0 {
			return nil, errors.New("dual: NewSampler: negative class")
		}
		p = max(p, c+1)
	}
	strata := make([][]int64, p)
	for i, id := range ids {
		strata[classes[i]] = append(strata[classes[i]], id)
	}
	s := &Sampler{seed: seed, batch: batch, strata: strata, pass: make([]int, p), pos: make([]int, p)}
	s.rebuild()
	return s, nil
}

func (s *Sampler) rebuild() {
	s.perm = make([][]int64, len(s.strata))
	for c := range s.strata {
		s.shuffle(c)
	}
}

func (s *Sampler) shuffle(c int) {
	p := append(s.perm[c][:0], s.strata[c]...)
	r := rand.New(rand.NewPCG(s.seed, uint64(c)<<32|uint64(s.pass[c])))
	r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	s.perm[c] = p
}

// Next appends the next batch of ids to dst[:0] and returns it.
func (s *Sampler) Next(dst []int64) []int64 {
	dst = dst[:0]
	var nonEmpty []int
	for c, st := range s.strata {
		if len(st) > 0 {
			nonEmpty = append(nonEmpty, c)
		}
	}
	q, rem := s.batch/len(nonEmpty), s.batch%len(nonEmpty)
	for j := range nonEmpty {
		// The remainder rotates over classes so no class is favoured.
		c := nonEmpty[(s.next+j)%len(nonEmpty)]
		k := q
		if j < rem {
			k++
		}
		for range k {
			if s.pos[c] == len(s.perm[c]) {
				s.pass[c]++
				s.pos[c] = 0
				s.shuffle(c)
			}
			dst = append(dst, s.perm[c][s.pos[c]])
			s.pos[c]++
		}
	}
	s.next = (s.next + rem) % len(nonEmpty)
	return dst
}

type samplerJSON struct {
	Seed   uint64    `json:"seed"`
	Batch  int       `json:"batch"`
	Strata [][]int64 `json:"strata"`
	Pass   []int     `json:"pass"`
	Pos    []int     `json:"pos"`
	Next   int       `json:"next"`
}

// MarshalJSON implements json.Marshaler.
func (s *Sampler) MarshalJSON() ([]byte, error) {
	return json.Marshal(samplerJSON{s.seed, s.batch, s.strata, s.pass, s.pos, s.next})
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Sampler) UnmarshalJSON(b []byte) error {
	var j samplerJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if len(j.Pass) != len(j.Strata) || len(j.Pos) != len(j.Strata) || j.Batch < 1 {
		return errors.New("dual: sampler checkpoint is inconsistent")
	}
	for c := range j.Strata {
		if j.Pos[c] < 0 || j.Pos[c] > len(j.Strata[c]) {
			return errors.New("dual: sampler checkpoint position out of range")
		}
	}
	*s = Sampler{seed: j.Seed, batch: j.Batch, strata: j.Strata, pass: j.Pass, pos: j.Pos, next: j.Next}
	s.rebuild()
	return nil
}
