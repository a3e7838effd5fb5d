package evaluate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/metrics"
)

const shards = 3

var testRun = Setup{Model: "m.onnx", ModelSHA256: "ab", Images: "imgs", Masks: "masks", Classes: 3, Ignore: 255,
	ClassNames: []string{}, Preprocess: json.RawMessage(`{}`), SizeClasses: []int{1}}

// scoreImages scores twelve tiny images (and one that failed) into the
// partials of spec's shards through NewPartial and Add, as eval does.
func scoreImages(t testing.TB, run Setup, specs ...shard.Spec) []*Partial {
	t.Helper()
	parts := make([]*Partial, len(specs))
	for i, s := range specs {
		parts[i] = NewPartial(s, run)
	}
	for i := 0; i < 12; i++ {
		name := fmt.Sprintf("img%02d.png", i)
		target := []uint8{0, 1, uint8(i % 3), 1, 255, uint8(i % 2)}
		pred := []uint8{0, 1, 1, uint8(i % 3), 0, 2}
		conf := metrics.NewConfusion(run.Classes, run.Ignore)
		if err := conf.Add(pred, target); err != nil {
			t.Fatal(err)
		}
		var in, all float64
		for _, v := range target {
			if v != 255 {
				all++
				if v == 1 {
					in++
				}
			}
		}
		for _, p := range parts {
			if p.Shard.Owns(name) {
				p.Add(name, conf, in/all)
				p.Images++
			}
		}
	}
	for _, p := range parts {
		if p.Shard.Owns("broken.png") {
			p.Failures = append(p.Failures, Failure{Path: "data/images/broken.png", Error: "bad PNG"})
			p.Images++
		}
	}
	return parts
}

func shardSpecs() []shard.Spec {
	specs := make([]shard.Spec, shards)
	for k := range specs {
		specs[k] = shard.Spec{Index: k, Count: shards}
	}
	return specs
}

// roundTrip is p as written and read back, unchecked.
func roundTrip(t testing.TB, p *Partial) *Partial {
	t.Helper()
	data, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var q Partial
	if err := json.Unmarshal(data, &q); err != nil {
		t.Fatal(err)
	}
	return &q
}

func encode(t testing.TB, p *Partial) []byte {
	t.Helper()
	data, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// wantRefused checks that err is a *PartialError naming file and saying want.
func wantRefused(t *testing.T, err error, file, want string) {
	t.Helper()
	var e *PartialError
	if !errors.As(err, &e) || e.File != file || !strings.Contains(e.Problem, want) {
		t.Fatalf("got %v, want a *PartialError naming %s with %q", err, file, want)
	}
	if !strings.HasPrefix(err.Error(), file+": ") {
		t.Errorf("message %q does not start with the file", err)
	}
}

// The shards' partials, written and read back, merge into the partial of
// one run over every image, with the same report.
func TestMergeOfShardsEqualsOneRun(t *testing.T) {
	for _, threshold := range []float64{0, 0.3} {
		run := testRun
		run.SizeThreshold = threshold
		parts := scoreImages(t, run, append(shardSpecs(), shard.All)...)
		one := parts[shards]
		var read []*Partial
		var names []string
		for k := shards - 1; k >= 0; k-- {
			name := fmt.Sprintf("part%d.json", k)
			p, err := ParsePartial(encode(t, parts[k]), name)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Records) == 0 {
				t.Fatalf("shard %d scored no image: the test data is too small", k)
			}
			read, names = append(read, p), append(names, name)
		}
		merged, err := MergePartials(read, names)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(merged.Confusion, one.Confusion) || merged.Images != one.Images || len(merged.Failures) != 1 {
			t.Errorf("merged %v (%d images), one run %v (%d)", merged.Confusion, merged.Images, one.Confusion, one.Images)
		}
		s1, l1, th1, ok1 := one.SizeGroups()
		s2, l2, th2, ok2 := merged.SizeGroups()
		if !ok1 || !ok2 || th1 != th2 || !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(l1, l2) {
			t.Errorf("threshold %v: size groups differ: %v %v %v / %v %v %v", threshold, s1, l1, th1, s2, l2, th2)
		}
		if threshold > 0 && th1 != threshold {
			t.Errorf("size threshold %v, want %v", th1, threshold)
		}
		if _, err := ParsePartial(encode(t, one), "whole.json"); err != nil {
			t.Errorf("one run's partial: %v", err)
		}
	}
}

// Each way of corrupting a valid partial is refused by ParsePartial, naming the
// file and what is wrong.
func TestParseRefusesCorruptedPartials(t *testing.T) {
	cell := func(p *Partial, r, c int) *[3]int64 { return &p.Records[r].Cells[c] }
	for _, tc := range []struct {
		name    string
		corrupt func(p *Partial)
		want    string
	}{
		{"matrix edited without its cells", func(p *Partial) { p.Confusion[1] += 5 }, "but its images' cells sum to"},
		{"negative matrix count", func(p *Partial) { p.Confusion[0] = -1 }, "negative count -1"},
		{"negative cell and matrix count", func(p *Partial) {
			c := cell(p, 0, 0)
			p.Confusion[c[0]*3+c[1]] -= c[2] + 4
			c[2] = -4
		}, "negative count -4"},
		{"cells overflow int64", func(p *Partial) {
			c0, c1 := cell(p, 0, 0), cell(p, 1, 0)
			c1[0], c1[1] = c0[0], c0[1]
			c0[2], c1[2] = math.MaxInt64, math.MaxInt64
		}, "overflow a 64-bit count"},
		{"matrix total overflows int64", func(p *Partial) {
			for _, r := range p.Records {
				clear(r.Cells)
			}
			*cell(p, 0, 0) = [3]int64{0, 0, math.MaxInt64 - 1}
			*cell(p, 1, 0) = [3]int64{1, 1, math.MaxInt64 - 1}
			clear(p.Confusion)
			p.Confusion[0], p.Confusion[4] = math.MaxInt64-1, math.MaxInt64-1
		}, "pixels in all"},
		{"images count above the records", func(p *Partial) { p.Images++ }, "images, but"},
		{"negative images count", func(p *Partial) { p.Images = -1 }, "negative image count"},
		{"record dropped", func(p *Partial) { p.Records = p.Records[1:] }, "images, but"},
		{"record duplicated", func(p *Partial) {
			r := p.Records[0]
			p.Records = append(p.Records, r)
			p.Images++
			for _, c := range r.Cells {
				p.Confusion[c[0]*3+c[1]] += c[2]
			}
		}, "recorded twice"},
		{"failure duplicates a record", func(p *Partial) {
			p.Failures = append(p.Failures, Failure{Path: "/x/" + p.Records[0].Image, Error: "e"})
			p.Images++
		}, "recorded twice"},
		{"image in another shard", func(p *Partial) {
			other := ""
			for i := 0; other == ""; i++ {
				if n := fmt.Sprintf("other%d.png", i); shard.Of(n, shards) != p.Shard.Index {
					other = n
				}
			}
			p.Records[0].Image = other
		}, "by its name's hash"},
		{"failed image in another shard", func(p *Partial) {
			p.Failures = append(p.Failures, Failure{Path: "img-not-here.png", Error: "e"})
			p.Images++
			for i := 0; shard.Of(p.Failures[len(p.Failures)-1].Path, shards) == p.Shard.Index; i++ {
				p.Failures[len(p.Failures)-1].Path = fmt.Sprintf("img-not-here%d.png", i)
			}
		}, "by its name's hash"},
		{"image name is a path", func(p *Partial) { p.Records[0].Image = "../" + p.Records[0].Image }, "not a file name"},
		{"fraction 5", func(p *Partial) { p.Records[0].Fraction = 5 }, "fraction 5 outside [0,1]"},
		{"negative fraction", func(p *Partial) { p.Records[0].Fraction = -0.25 }, "outside [0,1]"},
		{"cell outside the classes", func(p *Partial) {
			c := cell(p, 0, 0)
			p.Confusion[c[0]*3+c[1]] -= c[2]
			c[0] = 3
		}, "outside the 3 classes"},
		{"matrix of another shape", func(p *Partial) { p.Confusion = p.Confusion[:4] }, "confusion matrix of 4 counts for 3 classes"},
		{"zero classes", func(p *Partial) { p.Setup.Classes = 0 }, "0 classes"},
		{"shard index at the count", func(p *Partial) { p.Shard.Index = shards }, "shard 3/3"},
		{"shard count 0", func(p *Partial) { p.Shard.Index, p.Shard.Count = 0, 0 }, "shard 0/0"},
		{"negative shard index", func(p *Partial) { p.Shard.Index = -1 }, "shard -1/3"},
		{"shard count over the maximum", func(p *Partial) { p.Shard.Count = shard.MaxCount + 1 }, "the count must be from 1"},
		{"negative seconds", func(p *Partial) { p.Seconds = -1 }, "seconds -1"},
		{"seconds 1e308", func(p *Partial) { p.Seconds = 1e308 }, "seconds 1e+308 (from 0 to 1e+09)"},
		{"more class names than classes", func(p *Partial) {
			p.Setup.ClassNames = make([]string, 100000)
		}, "100000 class names for 3 classes"},
		{"over-long class name", func(p *Partial) {
			p.Setup.ClassNames = []string{"a", strings.Repeat("x", MaxClassNameBytes+1)}
		}, "class 1's name is 257 bytes long"},
		{"older version", func(p *Partial) { p.Version = 1 }, "partial version 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := roundTrip(t, scoreImages(t, testRun, shardSpecs()...)[1])
			if len(p.Records) < 2 {
				t.Fatal("the test shard has fewer than two images")
			}
			tc.corrupt(p)
			_, err := ParsePartial(encode(t, p), "part1.json")
			wantRefused(t, err, "part1.json", tc.want)
		})
	}
}

// A non-finite fraction, which JSON cannot carry, is refused by Check.
func TestCheckRefusesNonFiniteFractions(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		p := scoreImages(t, testRun, shard.All)[0]
		p.Records[0].Fraction = v
		wantRefused(t, p.Check("p.json"), "p.json", "outside [0,1]")
	}
}

func TestParseRefusesWhatIsNoPartial(t *testing.T) {
	valid := encode(t, scoreImages(t, testRun, shard.All)[0])
	for _, tc := range []struct {
		data, want string
	}{
		{`{"mine": true}`, "not a segtune eval partial"},
		{`{"format": "other"}`, `format "other"`},
		{string(valid) + `{}`, "data after its JSON object"},
		{`[`, "not a segtune eval partial"},
	} {
		_, err := ParsePartial([]byte(tc.data), "f.json")
		wantRefused(t, err, "f.json", tc.want)
	}
}

// MergePartials refuses partials that are not the shards of one evaluation, each
// once, naming the file at fault.
func TestMergeRefusesMismatchedPartials(t *testing.T) {
	parts := scoreImages(t, testRun, shardSpecs()...)
	names := []string{"p0.json", "p1.json", "p2.json"}
	if _, err := MergePartials(parts[:2], names[:2]); err == nil || !strings.Contains(err.Error(), "shard(s) 2 of 3 missing") {
		t.Errorf("missing shard: %v", err)
	}
	_, err := MergePartials([]*Partial{parts[0], parts[0], parts[2]}, names)
	wantRefused(t, err, "p1.json", "given twice (also p0.json)")

	classes := roundTrip(t, parts[1])
	classes.Setup.Classes = 4
	classes.Confusion = make([]int64, 16)
	for _, r := range classes.Records {
		for _, c := range r.Cells {
			classes.Confusion[c[0]*4+c[1]] += c[2]
		}
	}
	if err := classes.Check("p1.json"); err != nil {
		t.Fatalf("the 4-class partial is not valid by itself: %v", err)
	}
	_, err = MergePartials([]*Partial{parts[0], classes, parts[2]}, names)
	wantRefused(t, err, "p1.json", "differ in classes (3 and 4)")

	other := NewPartial(shard.Spec{Index: 1, Count: 4}, testRun)
	_, err = MergePartials([]*Partial{parts[0], other}, names[:2])
	wantRefused(t, err, "p1.json", "but p0.json is of 3 shards")

	// Two many-shard partials: the missing ones are named, up to ten.
	many := []*Partial{NewPartial(shard.Spec{Index: 0, Count: shard.MaxCount}, testRun), NewPartial(shard.Spec{Index: 5, Count: shard.MaxCount}, testRun)}
	if _, err := MergePartials(many, names[:2]); err == nil || !strings.Contains(err.Error(), "1, 2, 3, 4, 6, 7, 8, 9, 10, 11, and 1048564 more") {
		t.Errorf("many missing shards: %v", err)
	}
}

// Merged counts that overflow int64 are refused, naming the partial that
// overflowed them.
func TestMergeRefusesOverflowingSums(t *testing.T) {
	parts := scoreImages(t, testRun, shardSpecs()...)
	for _, p := range parts {
		clear(p.Confusion)
		for _, r := range p.Records {
			clear(r.Cells)
		}
		p.Records[0].Cells[0][2] = math.MaxInt64 / 2
		p.Confusion[0] = math.MaxInt64 / 2
		if err := p.Check("p"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := MergePartials(parts, []string{"p0.json", "p1.json", "p2.json"})
	wantRefused(t, err, "p2.json", "overflow a 64-bit count")
}
