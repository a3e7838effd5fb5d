package data

import (
	"context"
	"slices"

	"github.com/segtune/segtune/imageio/datalayout"
)

// Report is a check of one split of a data set as training reads it: the
// pairs that decode, the files that pair with nothing or cannot be used,
// and per class its pixels, images and object sizes.
type Report struct {
	Root       string                 `json:"root"`
	Format     string                 `json:"format"`
	Split      string                 `json:"split,omitempty"`
	Pairs      int                    `json:"pairs"`
	Unmatched  []datalayout.Unmatched `json:"unmatched"`
	Problems   []FileProblem          `json:"problems"`
	NumClasses int                    `json:"classes"`
	Ignore     int                    `json:"ignore"`
	Classes    []ClassReport          `json:"histogram"`
}

// Bad counts the files the report names as needing attention.
func (r *Report) Bad() int { return len(r.Unmatched) + len(r.Problems) }

// FileProblem is a file that cannot be used, and why.
type FileProblem struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// ClassReport is one class's pixels, images and object sizes.
type ClassReport struct {
	Class  int    `json:"class"`
	Name   string `json:"name,omitempty"`
	Pixels int64  `json:"pixels"`
	Images int    `json:"images"`
	// Size is the distribution of the class's share of the labelled
	// pixels of the images it is in; nil when it is in none.
	Size *SizeSpread `json:"size,omitempty"`
}

// SizeSpread is a distribution of object sizes by its quantiles.
type SizeSpread struct {
	Min    float64 `json:"min"`
	P10    float64 `json:"p10"`
	Median float64 `json:"median"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
}

// Check decodes every sample of set, read as cfg says (label map,
// palette, classes, ignore label, class names; its Data, Format and
// Split are set's), and reports on it. A file at fault is named in the
// report, not returned as an error; the error is for a set that cannot
// be read at all.
func Check(ctx context.Context, set *datalayout.Set, cfg Config) (Report, error) {
	r := Report{Root: set.Root, Format: set.Format, Split: set.Split, Unmatched: set.Unmatched,
		Problems: []FileProblem{}, Ignore: cfg.Ignore}
	if r.Unmatched == nil {
		r.Unmatched = []datalayout.Unmatched{}
	}
	if len(set.Samples) == 0 {
		return r, nil
	}
	cfg.Data, cfg.Format, cfg.Split, cfg.CrowdAsClass = set.Root, set.Format, set.Split, set.CrowdAsClass
	cfg.SkipBad, cfg.CacheBytes = true, -1
	ds, problems, err := Open(ctx, cfg)
	unmatched := map[string]bool{}
	for _, u := range set.Unmatched {
		unmatched[u.Path] = true
	}
	for _, p := range problems {
		if !unmatched[p.Path] { // already named as unmatched
			r.Problems = append(r.Problems, FileProblem{Path: p.Path, Error: p.Err.Error()})
		}
	}
	if err != nil {
		if len(r.Problems) > 0 { // every example is bad: each is named
			return r, nil
		}
		return r, err
	}
	r.Pairs, r.NumClasses = ds.Len(), ds.NumClasses()
	for k := range ds.NumClasses() {
		r.Classes = append(r.Classes, classReport(ds, k, cfg.ClassNames))
	}
	return r, nil
}

// classReport sums class k over ds.
func classReport(ds *Dataset, k int, names []string) ClassReport {
	cc := ClassReport{Class: k}
	if k < len(names) {
		cc.Name = names[k]
	}
	var sizes []float64
	for id := range ds.Len() {
		if n := ds.ClassCounts(id)[k]; n > 0 {
			cc.Pixels += n
			cc.Images++
			sizes = append(sizes, ds.Fraction(id, k))
		}
	}
	if len(sizes) > 0 {
		slices.Sort(sizes)
		q := func(p float64) float64 { return sizes[int(p*float64(len(sizes)-1)+0.5)] }
		cc.Size = &SizeSpread{Min: sizes[0], P10: q(0.1), Median: q(0.5), P90: q(0.9), Max: sizes[len(sizes)-1]}
	}
	return cc
}
