package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/metrics"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// An eval shard's scores, written with --partial and combined by
// `segtune eval merge`. A single run goes through the same accumulator and
// the same summary, so merging the N shards of a job gives exactly the
// report one run over every image gives.

const (
	partialFormat  = "segtune-eval-partial"
	partialVersion = 1
	// maxPartialBytes bounds what merge reads (a partial with per-image
	// size records holds a few dozen bytes an image).
	maxPartialBytes = 4 << 30
)

// evalRun is what the shards of one job must share; merge refuses
// partials that differ in any of it.
type evalRun struct {
	Model       string          `json:"model"`
	ModelSHA256 string          `json:"model_sha256"`
	Images      string          `json:"images"`
	Masks       string          `json:"masks"`
	Classes     int             `json:"classes"`
	Ignore      int             `json:"ignore"`
	ClassNames  []string        `json:"class_names"`
	LabelMap    string          `json:"label_map"`
	Preprocess  json.RawMessage `json:"preprocess"` // canonical JSON (sorted keys)
	SizeClasses []int           `json:"size_classes"`
	// SizeThreshold is the threshold given (flag or checkpoint); 0 means
	// the mean object size over all images, known only once every shard
	// is in, so that the partials then carry one size record per image.
	SizeThreshold float64 `json:"size_threshold"`
}

// sizedRecord is one image's object size and its confusion counts (the
// non-zero cells: true class, predicted class, pixels).
type sizedRecord struct {
	Image    string     `json:"image"`
	Fraction float64    `json:"fraction"`
	Cells    [][3]int64 `json:"cells"`
}

// evalPartial is the partial file, and the accumulator of a run.
type evalPartial struct {
	Format    string        `json:"format"`
	Version   int           `json:"version"`
	Shard     shard.Spec    `json:"shard"`
	Run       evalRun       `json:"run"`
	Images    int           `json:"images"`
	Failures  []failureJSON `json:"failures"`
	Seconds   float64       `json:"seconds"`
	Device    string        `json:"device"`
	Confusion []int64       `json:"confusion"`
	// SizedImages counts the images with size records; with a given
	// threshold their counts are summed in Small and Large, else kept
	// one by one in Sized.
	SizedImages int           `json:"sized_images"`
	Small       []int64       `json:"small,omitempty"`
	Large       []int64       `json:"large,omitempty"`
	Sized       []sizedRecord `json:"sized,omitempty"`
}

func newEvalPartial(s shard.Spec, run evalRun) *evalPartial {
	k := run.Classes
	p := &evalPartial{Format: partialFormat, Version: partialVersion, Shard: shard.Spec{Index: s.Index, Count: max(s.Count, 1)},
		Run: run, Failures: []failureJSON{}, Confusion: make([]int64, k*k)}
	if len(run.SizeClasses) > 0 && run.SizeThreshold > 0 {
		p.Small, p.Large = make([]int64, k*k), make([]int64, k*k)
	}
	return p
}

// add scores one image (name: its file name); not safe for concurrent use.
func (p *evalPartial) add(name string, conf *metrics.Confusion, fraction float64) {
	addCounts(p.Confusion, conf.Counts)
	if len(p.Run.SizeClasses) == 0 {
		return
	}
	p.SizedImages++
	if p.Run.SizeThreshold > 0 {
		if fraction > p.Run.SizeThreshold {
			addCounts(p.Large, conf.Counts)
		} else {
			addCounts(p.Small, conf.Counts)
		}
		return
	}
	r := sizedRecord{Image: name, Fraction: fraction, Cells: [][3]int64{}}
	k := conf.Classes
	for i, n := range conf.Counts {
		if n != 0 {
			r.Cells = append(r.Cells, [3]int64{int64(i / k), int64(i % k), n})
		}
	}
	p.Sized = append(p.Sized, r)
}

func addCounts(dst, src []int64) {
	for i, v := range src {
		dst[i] += v
	}
}

func (p *evalPartial) confusion(counts []int64) *metrics.Confusion {
	m := metrics.NewConfusion(p.Run.Classes, p.Run.Ignore)
	copy(m.Counts, counts)
	return m
}

// summary is the report: the same for one run and for merged shards.
// With the mean threshold, images are taken in name order, so that the
// mean is summed in one order whichever shards the images came from.
func (p *evalPartial) summary() evalSummary {
	names := p.Run.ClassNames
	failures := slices.Clone(p.Failures)
	sort.SliceStable(failures, func(i, j int) bool { return failures[i].Path < failures[j].Path })
	sum := evalSummary{Report: metrics.NewReport(p.confusion(p.Confusion), names), Images: p.Images,
		Failed: len(failures), Failures: failures, Seconds: p.Seconds, Device: p.Device}
	if p.SizedImages == 0 {
		return sum
	}
	var small, large *metrics.Confusion
	threshold := p.Run.SizeThreshold
	if threshold > 0 {
		small, large = p.confusion(p.Small), p.confusion(p.Large)
	} else {
		sized := slices.Clone(p.Sized)
		sort.Slice(sized, func(i, j int) bool { return sized[i].Image < sized[j].Image })
		for _, r := range sized {
			threshold += r.Fraction
		}
		threshold /= float64(len(sized))
		k := p.Run.Classes
		small, large = metrics.NewConfusion(k, p.Run.Ignore), metrics.NewConfusion(k, p.Run.Ignore)
		for _, r := range sized {
			dst := small
			if r.Fraction > threshold {
				dst = large
			}
			for _, c := range r.Cells {
				dst.Counts[c[0]*int64(k)+c[1]] += c[2]
			}
		}
	}
	sum.Groups = map[string]metrics.Report{"small": metrics.NewReport(small, names), "large": metrics.NewReport(large, names)}
	if s, l := sum.Groups["small"].MeanIoU, sum.Groups["large"].MeanIoU; s != nil && l != nil {
		g := *l - *s
		sum.SizeGap = &g
	}
	sum.Threshold = threshold
	return sum
}

// encode is the partial's JSON.
func (p *evalPartial) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parsePartial reads a partial file's JSON and checks its shape.
func parsePartial(data []byte, name string) (*evalPartial, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p evalPartial
	if err := dec.Decode(&p); err != nil || p.Format != partialFormat {
		if err == nil {
			err = fmt.Errorf("format %q", p.Format)
		}
		return nil, fmt.Errorf("%s is not a segtune eval partial (%v)", name, err)
	}
	if p.Version != partialVersion {
		return nil, fmt.Errorf("%s: partial version %d; this segtune reads version %d", name, p.Version, partialVersion)
	}
	k := p.Run.Classes
	switch {
	case k < 1 || k > 65536:
		return nil, fmt.Errorf("%s: %d classes", name, k)
	case len(p.Confusion) != k*k:
		return nil, fmt.Errorf("%s: confusion matrix of %d counts for %d classes", name, len(p.Confusion), k)
	case p.Shard.Count < 1 || p.Shard.Index < 0 || p.Shard.Index >= p.Shard.Count:
		return nil, fmt.Errorf("%s: shard %d/%d", name, p.Shard.Index, p.Shard.Count)
	case (p.Small != nil || p.Large != nil) && (len(p.Small) != k*k || len(p.Large) != k*k):
		return nil, fmt.Errorf("%s: size-group matrices of the wrong size", name)
	}
	for _, r := range p.Sized {
		for _, c := range r.Cells {
			if c[0] < 0 || c[0] >= int64(k) || c[1] < 0 || c[1] >= int64(k) {
				return nil, fmt.Errorf("%s: size record of %s has class %d/%d outside the %d classes", name, r.Image, c[0], c[1], k)
			}
		}
	}
	if p.Failures == nil {
		p.Failures = []failureJSON{}
	}
	return &p, nil
}

// readPartial reads the partial file at v (a path or a URL).
func readPartial(c *cli.Context, v string) (*evalPartial, error) {
	f, name, err := storage.OpenFile(c.Context, v)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := f.ReadAll(c.Context, name, maxPartialBytes)
	if err != nil {
		return nil, err
	}
	return parsePartial(data, v)
}

// canonicalJSON is v's JSON with object keys sorted.
func canonicalJSON(v any) (json.RawMessage, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// sameRun returns the first field in which two runs differ, or "". The
// model's path is left out (each worker may keep its copy elsewhere): its
// SHA-256 decides.
func sameRun(a, b evalRun) string {
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

// mergePartials combines the partials of every shard of one job.
func mergePartials(parts []*evalPartial, names []string) (*evalPartial, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("no partial files given")
	}
	first := parts[0]
	count := first.Shard.Count
	from := make([]string, count)
	for i, p := range parts {
		if d := sameRun(first.Run, p.Run); d != "" {
			return nil, fmt.Errorf("%s and %s are not shards of one evaluation: they differ in %s", names[0], names[i], d)
		}
		if p.Shard.Count != count {
			return nil, fmt.Errorf("%s is shard %d/%d but %s is of %d shards", names[i], p.Shard.Index, p.Shard.Count, names[0], count)
		}
		if prev := from[p.Shard.Index]; prev != "" {
			return nil, fmt.Errorf("shard %d/%d is given twice: %s and %s", p.Shard.Index, count, prev, names[i])
		}
		from[p.Shard.Index] = names[i]
	}
	var missing []string
	for k, f := range from {
		if f == "" {
			missing = append(missing, fmt.Sprint(k))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("shard(s) %s of %d missing: every shard's partial is needed for the report of the whole set", strings.Join(missing, ", "), count)
	}
	out := newEvalPartial(shard.All, first.Run)
	devices := map[string]bool{}
	seen := map[string]string{}
	for i, p := range parts {
		out.Images += p.Images
		out.Failures = append(out.Failures, p.Failures...)
		out.Seconds += p.Seconds
		devices[p.Device] = true
		addCounts(out.Confusion, p.Confusion)
		out.SizedImages += p.SizedImages
		if out.Small != nil && p.Small != nil {
			addCounts(out.Small, p.Small)
			addCounts(out.Large, p.Large)
		}
		for _, r := range p.Sized {
			if prev, dup := seen[r.Image]; dup {
				return nil, fmt.Errorf("image %s is scored in both %s and %s", r.Image, prev, names[i])
			}
			seen[r.Image] = names[i]
			out.Sized = append(out.Sized, r)
		}
	}
	ds := make([]string, 0, len(devices))
	for d := range devices {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	out.Device = strings.Join(ds, ",")
	return out, nil
}

// printEvalSummary prints the report (text or --json) and returns the
// exit error when images failed.
func printEvalSummary(c *cli.Context, sum evalSummary) error {
	if c.Bool("json") {
		if err := printJSON(os.Stdout, sum); err != nil {
			return err
		}
	} else {
		for _, f := range sum.Failures {
			fmt.Fprintf(os.Stderr, "segtune: skipped %s: %s\n", f.Path, f.Error)
		}
		writeEvalText(os.Stdout, sum)
	}
	if sum.Failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", sum.Failed, sum.Images), 1)
	}
	return nil
}

func writeEvalText(w io.Writer, sum evalSummary) {
	sum.Report.WriteText(w)
	for _, g := range []string{"small", "large"} {
		if r, ok := sum.Groups[g]; ok && r.MeanIoU != nil {
			fmt.Fprintf(w, "%-9s  %.4f  (mean IoU of images with %s objects, size threshold %.4g)\n", g, *r.MeanIoU, g, sum.Threshold)
		}
	}
	if sum.SizeGap != nil {
		fmt.Fprintf(w, "%-9s  %+.4f  (large − small)\n", "size gap", *sum.SizeGap)
	}
	fmt.Fprintf(w, "%d images scored in %.1fs on %s\n", sum.Images-sum.Failed, sum.Seconds, sum.Device)
}

func evalMergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "combine the --partial files of every eval shard into the report of the whole set",
		ArgsUsage: "PARTIAL...",
		Description: "Reads the partial files that `segtune eval --shard K/N --partial FILE` wrote (paths or URLs),\n" +
			"checks that they are the N shards of one evaluation (same model, data, settings; each shard once),\n" +
			"and prints exactly the report one run over every image gives (seconds: the shards' total).",
		Flags: []cli.Flag{jsonFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("eval merge: give the partial files of every shard", 2)
			}
			var parts []*evalPartial
			for _, v := range c.Args().Slice() {
				p, err := readPartial(c, v)
				if err != nil {
					return cli.Exit(err.Error(), 1)
				}
				parts = append(parts, p)
			}
			merged, err := mergePartials(parts, c.Args().Slice())
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return printEvalSummary(c, merged.summary())
		},
	}
}
