// Package preprocsearch finds how a model wants its images fed from a few
// of the user's labelled images: it scores a small set of candidate
// preprocessings (value range, ImageNet mean/std, channel order, the
// model's fixed size or the images' own, and the current settings) with
// segtune's evaluation (package evaluate: one scoring for every command)
// and says which are better than others beyond the noise of so few images.
//
// Users often do not know how their model was trained; segtune's defaults
// were wrong for every published model of issue 43 (one fell from 0.73 to
// 0.26 mIoU), and one publisher's own config gave the worse of two
// normalisations.
package preprocsearch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"path/filepath"
	"slices"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
	"github.com/segtune/segtune/metrics"
)

// Candidate is one way to feed the model.
type Candidate struct {
	Name       string             `json:"name"`
	Preprocess imageio.Preprocess `json:"preprocess"`
	// Current marks the settings the model runs with today.
	Current bool `json:"current,omitempty"`
}

// The value mappings tried: each with the channel order the tensor has.
var imagenetMean, imagenetStd = []float64{0.485, 0.456, 0.406}, []float64{0.229, 0.224, 0.225}

type normalisation struct {
	name string
	set  func(p *imageio.Preprocess, bgr bool)
}

var normalisations = []normalisation{
	{"0..1", func(p *imageio.Preprocess, _ bool) { p.ValueScale = 1.0 / 255 }},
	{"-1..1", func(p *imageio.Preprocess, _ bool) { p.ValueScale, p.ValueOffset = 1/127.5, -1 }},
	{"0..255", func(p *imageio.Preprocess, _ bool) {}},
	{"ImageNet mean/std", func(p *imageio.Preprocess, bgr bool) {
		// Mean and Std are listed in the tensor's channel order.
		p.Mean, p.Std = slices.Clone(imagenetMean), slices.Clone(imagenetStd)
		if bgr {
			slices.Reverse(p.Mean)
			slices.Reverse(p.Std)
		}
	}},
}

// Candidates are the preprocessings tried for a model whose current
// settings are current and whose input is fixedH×fixedW (0 where
// dynamic): every value mapping in RGB and BGR order, at the current
// geometry and, where it differs, at the model's fixed size (stretched)
// or the images' own size; then the current settings, unless one of them
// already is.
func Candidates(current imageio.Preprocess, fixedH, fixedW int64) []Candidate {
	type geometry struct {
		name string
		set  func(p *imageio.Preprocess)
	}
	keep := func(p *imageio.Preprocess) {
		p.Height, p.Width, p.Resize, p.ScaleFactor = current.Height, current.Width, current.Resize, current.ScaleFactor
		p.MultipleOf, p.PlusOne, p.PadColor, p.PadPosition = current.MultipleOf, current.PlusOne, current.PadColor, current.PadPosition
	}
	geos := []geometry{{geometryName(current), keep}}
	var other geometry
	if fixedH > 0 && fixedW > 0 {
		other = geometry{fmt.Sprintf("%dx%d stretched", fixedH, fixedW), func(p *imageio.Preprocess) {
			p.Height, p.Width, p.Resize = int(fixedH), int(fixedW), imageio.ResizeStretch
		}}
	} else {
		other = geometry{"own size", func(p *imageio.Preprocess) { p.Resize = imageio.ResizeNone }}
	}
	var probe imageio.Preprocess
	other.set(&probe)
	if geometryName(probe) != geos[0].name {
		geos = append(geos, other)
	}
	var out []Candidate
	curNorm := normalisationOf(current)
	found := false
	for _, g := range geos {
		for _, order := range []imageio.ChannelOrder{imageio.RGB, imageio.BGR} {
			for _, n := range normalisations {
				p := imageio.Preprocess{ChannelOrder: order, Layout: current.Layout, Interpolation: current.Interpolation}
				g.set(&p)
				n.set(&p, order == imageio.BGR)
				c := Candidate{Name: fmt.Sprintf("%s %s, %s", order, n.name, g.name), Preprocess: p}
				if geometryName(p) == geometryName(current) && normalisationOf(p) == curNorm {
					c.Current, found = true, true
					c.Preprocess = current
				}
				out = append(out, c)
			}
		}
	}
	if !found {
		out = append(out, Candidate{Name: "current: " + curNorm + ", " + geometryName(current), Preprocess: current, Current: true})
	}
	return out
}

// geometryName says how an image is brought to the model's input.
func geometryName(p imageio.Preprocess) string {
	switch {
	case p.Resize == imageio.ResizeScale:
		s := fmt.Sprintf("×%g", p.ScaleFactor)
		if p.MultipleOf > 1 {
			s += fmt.Sprintf(" to a multiple of %d", p.MultipleOf)
			if p.PlusOne {
				s += " +1"
			}
		}
		return s
	case p.Height > 0 && p.Width > 0 && p.Resize == imageio.ResizeLetterbox:
		return fmt.Sprintf("%dx%d letterboxed", p.Height, p.Width)
	case p.Height > 0 && p.Width > 0 && p.Resize != imageio.ResizeNone:
		return fmt.Sprintf("%dx%d stretched", p.Height, p.Width)
	}
	return "own size"
}

// normalisationOf describes p's channel order and value mapping, the
// same for equal mappings however they are written.
func normalisationOf(p imageio.Preprocess) string {
	order := p.ChannelOrder
	if order == "" {
		order = imageio.RGB
	}
	if len(p.Mean) > 0 || len(p.Std) > 0 {
		return fmt.Sprintf("%s mean %v std %v on %s", order, p.Mean, p.Std, orUnit(p.MeanStdRange))
	}
	s := p.ValueScale
	if s == 0 {
		s = 1
	}
	return fmt.Sprintf("%s %.6g·x%+.6g", order, s, p.ValueOffset)
}

func orUnit(r string) string {
	if r == "" {
		return imageio.RangeUnit
	}
	return r
}

// Request is a search: the model, its current settings (label map, class
// names and output reading stay; the preprocessing is what varies), the
// labelled images (as evaluate.Request takes them) and how many to use.
type Request struct {
	Model    string
	Settings imageio.Sidecar
	Images   *storage.Folder
	Masks    *storage.Folder
	Set      *datalayout.Set
	Options  evaluate.SetupOptions
	// Sample is how many images are scored (evenly spread over the
	// pairs, in their order); 0 or more than there are: all.
	Sample int
	// Open opens the model at path with settings (the caller's session
	// options).
	Open func(path string, settings imageio.Sidecar) (*inference.Segmenter, error)
	// Progress, if set, is told each candidate as it is scored.
	Progress func(done, total int, c Candidate)
}

// Score is a candidate's result.
type Score struct {
	Candidate
	// MeanIoU is over the sampled images' pixels (NaN when the candidate
	// could not be scored: Err says why).
	MeanIoU float64 `json:"mean_iou"`
	// Tie says that the best candidate's lead over this one is within the
	// noise of the sample (see Result.Ties); the best itself has it set.
	Tie bool   `json:"tie"`
	Err string `json:"error,omitempty"`
	// counts are the per-image confusion counts, in sample order.
	counts [][]int64
}

// Result is a search's outcome.
type Result struct {
	// Scores are sorted best first; unscorable candidates last.
	Scores []Score `json:"candidates"`
	// Images is how many labelled images were scored, of Available.
	Images    int `json:"images"`
	Available int `json:"available"`
	// Chosen is the candidate to use: the best, or the current settings
	// when they tie with it (nothing shows a change would help).
	Chosen int `json:"chosen"`
	// Resamples is how many bootstrap resamples decided the ties.
	Resamples int `json:"resamples"`
}

// Resamples of the images for the tie test, and the share of them in
// which a candidate must reach the best's mIoU to tie with it.
const (
	resamples = 1000
	tieShare  = 0.05
)

// ErrNothingScored is returned when no candidate could be scored.
var ErrNothingScored = errors.New("no candidate preprocessing could be scored on these images")

// Search scores cands on the request's sample of labelled images.
func Search(ctx context.Context, r Request, cands []Candidate) (*Result, error) {
	samples, err := collect(ctx, r)
	if err != nil {
		return nil, err
	}
	res := &Result{Available: len(samples), Resamples: resamples}
	samples = spread(samples, r.Sample)
	res.Images = len(samples)
	// The tie test pairs each image's scores across candidates by name.
	if err := evaluate.UniqueNames(samples); err != nil {
		return nil, err
	}
	classes := 0
	for i, c := range cands {
		if r.Progress != nil {
			r.Progress(i, len(cands), c)
		}
		s, k, err := score(ctx, r, c, samples)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			s = Score{Candidate: c, MeanIoU: math.NaN(), Err: err.Error()}
		}
		classes = max(classes, k)
		res.Scores = append(res.Scores, s)
	}
	slices.SortStableFunc(res.Scores, func(a, b Score) int {
		switch an, bn := math.IsNaN(a.MeanIoU), math.IsNaN(b.MeanIoU); {
		case an && bn:
			return 0
		case an:
			return 1
		case bn:
			return -1
		}
		if a.MeanIoU > b.MeanIoU {
			return -1
		}
		if a.MeanIoU < b.MeanIoU {
			return 1
		}
		return 0
	})
	if math.IsNaN(res.Scores[0].MeanIoU) {
		return res, fmt.Errorf("%w: %s", ErrNothingScored, res.Scores[0].Err)
	}
	res.markTies(classes, r.ignore())
	for i, s := range res.Scores {
		if s.Current && s.Tie {
			res.Chosen = i
		}
	}
	return res, nil
}

func (r Request) ignore() int {
	if r.Options.Ignore != nil {
		return *r.Options.Ignore
	}
	if r.Settings.IgnoreLabel != nil {
		return *r.Settings.IgnoreLabel
	}
	return evaluate.DefaultIgnore
}

// evaluateAll is the shard of all the images.
var evaluateAll = shard.Spec{}

// collect lists the request's labelled pairs.
func collect(ctx context.Context, r Request) ([]datalayout.Sample, error) {
	pairs, _, err := evaluate.Pairs(ctx, r.Set, r.Images, r.Masks, evaluateAll)
	if err != nil {
		return nil, err
	}
	var out []datalayout.Sample
	for s, err := range pairs {
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, evaluate.ErrNoPairs
	}
	return out, nil
}

// spread picks n samples evenly spread over all of them, in order.
func spread(all []datalayout.Sample, n int) []datalayout.Sample {
	if n <= 0 || n >= len(all) {
		return all
	}
	out := make([]datalayout.Sample, n)
	for i := range out {
		out[i] = all[i*len(all)/n]
	}
	return out
}

// score evaluates one candidate on the samples with evaluate's plan and
// run, and keeps each image's confusion counts for the tie test.
func score(ctx context.Context, r Request, c Candidate, samples []datalayout.Sample) (Score, int, error) {
	settings := r.Settings
	pre := c.Preprocess
	settings.Preprocess = &pre
	if err := pre.Validate(); err != nil {
		return Score{}, 0, err
	}
	req := evaluate.Request{Model: r.Model, Settings: settings, Images: r.Images, Masks: r.Masks, Set: r.Set, Options: r.Options, Batch: 1, Open: r.Open}
	plan, err := req.Plan(ctx)
	if err != nil {
		return Score{}, 0, err
	}
	defer plan.Segmenter.Close()
	if plan.Pairs, plan.Total, err = evaluate.SamplePairs(samples, evaluateAll); err != nil {
		return Score{}, 0, err
	}
	acc, err := evaluate.Run(ctx, plan)
	if err != nil {
		return Score{}, 0, err
	}
	if len(acc.Failures) > 0 {
		f := acc.Failures[0]
		return Score{}, 0, fmt.Errorf("%d of %d images failed (%s: %s)", len(acc.Failures), len(samples), f.Path, f.Error)
	}
	k := acc.Setup.Classes
	byImage := map[string][]int64{}
	for _, rec := range acc.Records {
		counts := make([]int64, k*k)
		for _, cell := range rec.Cells {
			counts[cell[0]*int64(k)+cell[1]] += cell[2]
		}
		byImage[rec.Image] = counts
	}
	s := Score{Candidate: c, MeanIoU: acc.Matrix().MeanIoU()}
	for _, sm := range samples {
		counts, ok := byImage[path.Base(filepath.ToSlash(sm.Image))] // as evaluate.Run names its records
		if !ok {
			return Score{}, 0, fmt.Errorf("%s: not scored", sm.Image)
		}
		s.counts = append(s.counts, counts)
	}
	return s, k, nil
}

// markTies marks the candidates whose mIoU reaches the best's in at least
// tieShare of paired bootstrap resamples of the images: with a handful of
// images, a lead smaller than that is noise.
func (res *Result) markTies(classes, ignore int) {
	best := res.Scores[0]
	res.Scores[0].Tie = len(res.Scores) > 1
	n := res.Images
	rng := rand.New(rand.NewPCG(43, 1))
	draws := make([][]int, resamples)
	for d := range draws {
		draws[d] = make([]int, n)
		for i := range draws[d] {
			draws[d][i] = rng.IntN(n)
		}
	}
	miou := func(s Score, draw []int) float64 {
		m := metrics.NewConfusion(classes, ignore)
		for _, i := range draw {
			for j, v := range s.counts[i] {
				m.Counts[j] += v
			}
		}
		return m.MeanIoU()
	}
	bestOf := make([]float64, resamples)
	for d, draw := range draws {
		bestOf[d] = miou(best, draw)
	}
	anyTie := false
	for i := 1; i < len(res.Scores); i++ {
		s := &res.Scores[i]
		if math.IsNaN(s.MeanIoU) {
			continue
		}
		reach := 0
		for d, draw := range draws {
			if v := miou(*s, draw); v >= bestOf[d] || math.IsNaN(bestOf[d]) {
				reach++
			}
		}
		s.Tie = float64(reach) >= tieShare*resamples
		anyTie = anyTie || s.Tie
	}
	res.Scores[0].Tie = anyTie
}

// Tied returns the candidates that tie with the best, the best first
// (empty when the best is ahead of every other beyond the noise).
func (res *Result) Tied() []Score {
	var out []Score
	for _, s := range res.Scores {
		if s.Tie {
			out = append(out, s)
		}
	}
	return out
}
