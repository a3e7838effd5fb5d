package evaluate

// A partial is the file in which one shard of a sharded evaluation keeps
// its scores (`segtune eval --partial`); MergePartials combines them
// (`segtune eval merge`).
//
// A partial holds one record per scored image (its name, object size and
// non-zero confusion cells) beside the shard's confusion matrix, which is
// their sum. The records make a partial checkable on its own: ParsePartial
// refuses a matrix that is not the sum of its cells, an image count that
// disagrees with the records, an image that the shard's hash does not
// assign to it, and counts that are negative or overflow, so that a
// corrupted or hand-edited file is named rather than merged into a wrong
// score.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/metrics"
)

const (
	PartialFormat  = "segtune-eval-partial"
	PartialVersion = 2
	// MaxPartialBytes bounds what is read of a partial: a few dozen bytes per
	// image and non-zero confusion cell, so 256 MiB holds a shard of
	// millions of images; a larger file is refused before it is read.
	MaxPartialBytes = 256 << 20
	// MaxClasses bounds the class count (and so the matrix, Classes²).
	MaxClasses = 1 << 16
	// MaxClassNameBytes bounds each class name; there are at most Classes.
	MaxClassNameBytes = 256
	// MaxSeconds bounds a shard's recorded time (about 30 years), so that
	// the report's time is a number a person reads.
	MaxSeconds = 1e9
	// maxPixels bounds a matrix's total, so that the sums of a row and a
	// column (metrics' IoU) cannot overflow int64 either.
	maxPixels = math.MaxInt64 / 2
)

// Setup is what the shards of one evaluation must share; MergePartials refuses
// partials that differ in any of it.
type Setup struct {
	Model       string   `json:"model"`
	ModelSHA256 string   `json:"model_sha256"`
	Images      string   `json:"images"`
	Masks       string   `json:"masks"`
	Classes     int      `json:"classes"`
	Ignore      int      `json:"ignore"`
	ClassNames  []string `json:"class_names"`
	LabelMap    string   `json:"label_map"`
	// MaskPalette reads RGB colour masks (absent for label masks).
	MaskPalette json.RawMessage `json:"mask_palette,omitempty"`
	Preprocess  json.RawMessage `json:"preprocess"` // canonical JSON (sorted keys)
	SizeClasses []int           `json:"size_classes"`
	// SizeThreshold is the threshold given (flag or checkpoint); 0 means
	// the mean object size over all images, known only once every shard
	// is in.
	SizeThreshold float64 `json:"size_threshold"`
}

// Diff returns the first field in which two runs differ, or "". The
// model's path is left out (each worker may keep its copy elsewhere): its
// SHA-256 decides.
func (a Setup) Diff(b Setup) string {
	var ma, mb map[string]json.RawMessage
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	json.Unmarshal(ja, &ma)
	json.Unmarshal(jb, &mb)
	keys := make([]string, 0, len(ma))
	for k := range ma {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "model" && !bytes.Equal(ma[k], mb[k]) {
			return fmt.Sprintf("%s (%s and %s)", k, ma[k], mb[k])
		}
	}
	return ""
}

// Record is one scored image: its file name, the share of its labelled
// pixels in the size classes (0 without size classes), and its non-zero
// confusion cells (true class, predicted class, pixels).
type Record struct {
	Image    string     `json:"image"`
	Fraction float64    `json:"fraction,omitempty"`
	Cells    [][3]int64 `json:"cells"`
}

// Failure is an image that could not be scored.
type Failure = pipeline.FailureRecord

// Partial is the partial file, and the accumulator of a run.
type Partial struct {
	Format   string     `json:"format"`
	Version  int        `json:"version"`
	Shard    shard.Spec `json:"shard"`
	Setup    Setup      `json:"run"`
	Images   int        `json:"images"` // scored and failed
	Failures []Failure  `json:"failures"`
	Seconds  float64    `json:"seconds"`
	Device   string     `json:"device"`
	// Confusion is the sum of the records' cells, Classes² counts.
	Confusion []int64  `json:"confusion"`
	Records   []Record `json:"records"`
}

// PartialError is a partial refused: File names it (for a conflict between
// partials, the later one given).
type PartialError struct {
	File    string
	Problem string
}

func (e *PartialError) Error() string { return e.File + ": " + e.Problem }

func refuse(file, format string, args ...any) *PartialError {
	return &PartialError{File: file, Problem: fmt.Sprintf(format, args...)}
}

// NewPartial returns the empty partial of shard s of run.
func NewPartial(s shard.Spec, run Setup) *Partial {
	return &Partial{Format: PartialFormat, Version: PartialVersion, Shard: shard.Spec{Index: s.Index, Count: max(s.Count, 1)},
		Setup: run, Failures: []Failure{}, Confusion: make([]int64, run.Classes*run.Classes), Records: []Record{}}
}

// Add scores one image (name: its file name); not safe for concurrent
// use. Images counts the scored and failed images and is the caller's.
func (p *Partial) Add(name string, conf *metrics.Confusion, fraction float64) {
	r := Record{Image: name, Fraction: fraction, Cells: [][3]int64{}}
	k := conf.Classes
	for i, n := range conf.Counts {
		if n != 0 {
			p.Confusion[i] += n
			r.Cells = append(r.Cells, [3]int64{int64(i / k), int64(i % k), n})
		}
	}
	p.Records = append(p.Records, r)
}

// Encode is the partial's JSON.
func (p *Partial) Encode() ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ParsePartial reads the partial file called name from its JSON and checks it
// (Check); errors are *PartialError.
func ParsePartial(data []byte, name string) (*Partial, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Partial
	if err := dec.Decode(&p); err != nil || p.Format != PartialFormat {
		if err == nil {
			err = fmt.Errorf("format %q", p.Format)
		}
		return nil, refuse(name, "not a segtune eval partial (%v)", err)
	}
	if dec.More() {
		return nil, refuse(name, "not a segtune eval partial (data after its JSON object)")
	}
	if p.Version != PartialVersion {
		return nil, refuse(name, "partial version %d; this segtune reads version %d", p.Version, PartialVersion)
	}
	if p.Failures == nil {
		p.Failures = []Failure{}
	}
	if p.Records == nil {
		p.Records = []Record{}
	}
	if err := p.Check(name); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check verifies that p is what a run writes, naming file in its *PartialError:
// a valid shard and class count, at most one short name per class, a
// time from 0 to MaxSeconds, non-negative counts whose sums fit,
// object sizes in [0,1], each image once and in the shard its name hashes
// to, Images scored or failed, and the matrix the sum of the records'
// cells.
func (p *Partial) Check(file string) error {
	k := p.Setup.Classes
	switch {
	case k < 1 || k > MaxClasses:
		return refuse(file, "%d classes (from 1 to %d)", k, MaxClasses)
	case len(p.Confusion) != k*k:
		return refuse(file, "confusion matrix of %d counts for %d classes (%d wanted)", len(p.Confusion), k, k*k)
	case p.Shard.Count < 1 || p.Shard.Count > shard.MaxCount || p.Shard.Index < 0 || p.Shard.Index >= p.Shard.Count:
		return refuse(file, "shard %d/%d (the count must be from 1 to %d, the index from 0 to count−1)", p.Shard.Index, p.Shard.Count, shard.MaxCount)
	case p.Images < 0:
		return refuse(file, "negative image count %d", p.Images)
	case p.Images != len(p.Records)+len(p.Failures):
		return refuse(file, "%d images, but %d scored and %d failed images are recorded", p.Images, len(p.Records), len(p.Failures))
	case !(p.Seconds >= 0 && p.Seconds <= MaxSeconds):
		return refuse(file, "seconds %.3g (from 0 to %.0g)", p.Seconds, float64(MaxSeconds))
	case len(p.Setup.ClassNames) > k:
		return refuse(file, "%d class names for %d classes", len(p.Setup.ClassNames), k)
	case math.IsNaN(p.Setup.SizeThreshold) || math.IsInf(p.Setup.SizeThreshold, 0):
		return refuse(file, "size threshold %v", p.Setup.SizeThreshold)
	}
	for i, n := range p.Setup.ClassNames {
		if len(n) > MaxClassNameBytes {
			return refuse(file, "class %d's name is %d bytes long (at most %d)", i, len(n), MaxClassNameBytes)
		}
	}
	for i, n := range p.Confusion {
		if n < 0 {
			return refuse(file, "negative count %d in the confusion matrix (true class %d, predicted %d)", n, i/k, i%k)
		}
	}
	seen := make(map[string]bool, p.Images)
	name := func(image, what string) error {
		switch {
		case image == "" || image == "." || image == ".." || image != baseName(image):
			return refuse(file, "%s %q is not a file name", what, image)
		case seen[image]:
			return refuse(file, "image %s is recorded twice", image)
		case !p.Shard.Owns(image):
			return refuse(file, "image %s belongs to shard %d/%d by its name's hash, not to this file's shard %s", image, shard.Of(image, p.Shard.Count), p.Shard.Count, p.Shard)
		}
		seen[image] = true
		return nil
	}
	sum := make([]int64, k*k)
	for _, r := range p.Records {
		if err := name(r.Image, "scored image"); err != nil {
			return err
		}
		if !(r.Fraction >= 0 && r.Fraction <= 1) {
			return refuse(file, "image %s: object size fraction %v outside [0,1]", r.Image, r.Fraction)
		}
		for _, c := range r.Cells {
			t, pr, n := c[0], c[1], c[2]
			switch {
			case t < 0 || t >= int64(k) || pr < 0 || pr >= int64(k):
				return refuse(file, "image %s: cell of true class %d, predicted %d, outside the %d classes", r.Image, t, pr, k)
			case n < 0:
				return refuse(file, "image %s: negative count %d (true class %d, predicted %d)", r.Image, n, t, pr)
			}
			i := t*int64(k) + pr
			s, ok := addChecked(sum[i], n)
			if !ok {
				return refuse(file, "the pixels of true class %d predicted %d overflow a 64-bit count (at image %s)", t, pr, r.Image)
			}
			sum[i] = s
		}
	}
	for _, f := range p.Failures {
		if err := name(baseName(f.Path), "failed image"); err != nil {
			return err
		}
	}
	var total int64
	for i, n := range p.Confusion {
		if n != sum[i] {
			return refuse(file, "the confusion matrix counts %d pixels of true class %d predicted %d, but its images' cells sum to %d", n, i/k, i%k, sum[i])
		}
		var ok bool
		if total, ok = addChecked(total, n); !ok || total > maxPixels {
			return refuse(file, "more than %d pixels in all", int64(maxPixels))
		}
	}
	return nil
}

// baseName is p's last element, with either slash.
func baseName(p string) string { return path.Base(filepath.ToSlash(p)) }

// addChecked is a+b for b ≥ 0, and whether it fits in int64.
func addChecked(a, b int64) (int64, bool) {
	if b > math.MaxInt64-a {
		return 0, false
	}
	return a + b, true
}

// MergePartials combines the checked partials (ParsePartial, Check) of every shard of one evaluation
// (names: their files, for errors) into the partial of the whole set.
func MergePartials(parts []*Partial, names []string) (*Partial, error) {
	if len(parts) == 0 {
		return nil, errors.New("no partial files given")
	}
	first := parts[0]
	count := first.Shard.Count
	from := map[int]string{}
	for i, p := range parts {
		if d := first.Setup.Diff(p.Setup); d != "" {
			return nil, refuse(names[i], "not a shard of the evaluation of %s: they differ in %s", names[0], d)
		}
		if p.Shard.Count != count {
			return nil, refuse(names[i], "shard %s, but %s is of %d shards", p.Shard, names[0], count)
		}
		if prev, dup := from[p.Shard.Index]; dup {
			return nil, refuse(names[i], "shard %s is given twice (also %s)", p.Shard, prev)
		}
		from[p.Shard.Index] = names[i]
	}
	if len(from) < count {
		var missing []string
		for k := 0; k < count && len(missing) < 10; k++ {
			if _, ok := from[k]; !ok {
				missing = append(missing, fmt.Sprint(k))
			}
		}
		if more := count - len(from) - len(missing); more > 0 {
			missing = append(missing, fmt.Sprintf("and %d more", more))
		}
		return nil, fmt.Errorf("shard(s) %s of %d missing: every shard's partial is needed for the report of the whole set", strings.Join(missing, ", "), count)
	}
	out := NewPartial(shard.All, first.Setup)
	devices := map[string]bool{}
	for i, p := range parts {
		for j, n := range p.Confusion {
			s, ok := addChecked(out.Confusion[j], n)
			if !ok {
				return nil, refuse(names[i], "the merged pixels of true class %d predicted %d overflow a 64-bit count", j/first.Setup.Classes, j%first.Setup.Classes)
			}
			out.Confusion[j] = s
		}
		out.Images += p.Images
		out.Records = append(out.Records, p.Records...)
		out.Failures = append(out.Failures, p.Failures...)
		out.Seconds += p.Seconds
		devices[p.Device] = true
	}
	// Checked partials of distinct shards hold distinct images (each in
	// the shard of its hash); checked once more as a whole all the same.
	if err := out.Check("the merged partials"); err != nil {
		return nil, err
	}
	ds := make([]string, 0, len(devices))
	for d := range devices {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	out.Device = strings.Join(ds, ",")
	return out, nil
}

// SizeGroups splits the images at the run's size threshold (0: the mean
// object size, summed in image-name order so that one run and merged
// shards sum alike) into the matrices of images with small and large
// objects; ok is false without size classes or images.
func (p *Partial) SizeGroups() (small, large *metrics.Confusion, threshold float64, ok bool) {
	if len(p.Setup.SizeClasses) == 0 || len(p.Records) == 0 {
		return nil, nil, 0, false
	}
	records := slices.Clone(p.Records)
	sort.Slice(records, func(i, j int) bool { return records[i].Image < records[j].Image })
	threshold = p.Setup.SizeThreshold
	if threshold == 0 {
		for _, r := range records {
			threshold += r.Fraction
		}
		threshold /= float64(len(records))
	}
	k := p.Setup.Classes
	small, large = metrics.NewConfusion(k, p.Setup.Ignore), metrics.NewConfusion(k, p.Setup.Ignore)
	for _, r := range records {
		dst := small
		if r.Fraction > threshold {
			dst = large
		}
		for _, c := range r.Cells {
			dst.Counts[c[0]*int64(k)+c[1]] += c[2]
		}
	}
	return small, large, threshold, true
}

// Matrix is p's confusion matrix as a metrics.Confusion.
func (p *Partial) Matrix() *metrics.Confusion {
	m := metrics.NewConfusion(p.Setup.Classes, p.Setup.Ignore)
	copy(m.Counts, p.Confusion)
	return m
}
