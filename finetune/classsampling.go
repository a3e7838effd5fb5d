package finetune

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/internal/setting"
)

// SampleByClass is the Config.SampleBy value that samples images holding
// rare classes more often (repeatFactors).
const SampleByClass = "class"

// DefaultRepeatThreshold is Config.RepeatThreshold's default: classes in
// fewer than 10 % of the training images are oversampled.
const DefaultRepeatThreshold = 0.1

// CheckSampleBy checks Config's SampleBy and RepeatThreshold against
// Balanced, for callers that want the error before any other work.
func CheckSampleBy(sampleBy string, threshold float64, balanced bool) error {
	var err error
	switch {
	case sampleBy != "" && sampleBy != SampleByClass:
		err = errors.New("want class (or nothing: shuffled batches)")
	case sampleBy == "":
		return nil
	case balanced:
		err = errors.New("size-balanced batches (balance: half small, half large objects) are another sampler: turn balance off to sample by class")
	case !(threshold >= 0 && threshold <= 1):
		err = errors.New("the repeat threshold " + strconv.FormatFloat(threshold, 'g', -1, 64) + " is not a fraction of the images in [0, 1]")
	}
	if err != nil {
		return &setting.Error{Setting: "sample_by", Value: sampleBy, Err: err}
	}
	return nil
}

// repeatFactors are LVIS's repeat factors (Gupta et al., 2019) of the
// training images: a class in a fraction f of the images has
// r = max(1, √(t/f)), and an image the largest r of the classes it holds
// (1 with none).
func repeatFactors(ds *data.Dataset, t float64) []float64 {
	n, k := ds.Len(), ds.NumClasses()
	holds := make([][]bool, n)
	images := make([]int, k)
	for id := range n {
		counts := ds.ClassCounts(id)
		holds[id] = make([]bool, k)
		for c := range min(k, len(counts)) {
			if counts[c] > 0 {
				holds[id][c] = true
				images[c]++
			}
		}
	}
	rc := make([]float64, k)
	for c, m := range images {
		rc[c] = 1
		if m > 0 {
			rc[c] = max(1, math.Sqrt(t/(float64(m)/float64(n))))
		}
	}
	ri := make([]float64, n)
	for id := range n {
		ri[id] = 1
		for c, h := range holds[id] {
			if h {
				ri[id] = max(ri[id], rc[c])
			}
		}
	}
	return ri
}

// repeatFactorOrder is the loader's order for class sampling: each epoch
// every image is repeated ⌊r⌋ times and once more with probability r −
// ⌊r⌋, the list shuffled and its first n ids taken (n: the epoch's
// examples, as without the sampler, so steps and epochs keep their
// meaning). It depends only on the epoch and seed, for exact resumes.
func repeatFactorOrder(r []float64, seed uint64, n int) func(epoch int) []int {
	return func(epoch int) []int {
		pcg := rand.NewPCG(seed, 0x726570656174^uint64(epoch)) // "repeat"
		uniform := func() float64 { return float64(pcg.Uint64()>>11) / (1 << 53) }
		var ids []int
		for id, f := range r {
			times := int(f)
			if uniform() < f-float64(times) {
				times++
			}
			for range times {
				ids = append(ids, id)
			}
		}
		for i := len(ids) - 1; i > 0; i-- { // Fisher–Yates
			j := min(int(uniform()*float64(i+1)), i)
			ids[i], ids[j] = ids[j], ids[i]
		}
		return ids[:min(n, len(ids))]
	}
}
