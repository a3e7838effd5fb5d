package shard

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/setting"
)

// flag names a setting as a CLI would.
func flag(key string) string { return "--" + key }

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestParse(t *testing.T) {
	for _, ok := range []struct {
		in   string
		k, n int
	}{{"0/1", 0, 1}, {"2/3", 2, 3}, {" 1 / 4 ", 1, 4}} {
		s, err := Parse(ok.in)
		if err != nil || s.Index != ok.k || s.Count != ok.n {
			t.Errorf("Parse(%q) = %+v, %v", ok.in, s, err)
		}
	}
	for in, want := range map[string]string{
		"3/2": "index must be from 0 to 1", "2/2": "index must be from 0 to 1", "-1/2": "index",
		"0/0": "count must be from 1", "1": "not K/N", "a/b": "whole numbers", "": "not K/N",
	} {
		if _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): error %v, want one saying %q", in, err, want)
		}
	}
}

// Every name belongs to exactly one shard, and the shards are of
// comparable size.
func TestOwnsPartitions(t *testing.T) {
	const n, count = 3000, 3
	sizes := make([]int, count)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("frame_%06d.jpg", i)
		owners := 0
		for k := 0; k < count; k++ {
			if (Spec{Index: k, Count: count}).Owns(name) {
				owners++
				sizes[k]++
			}
		}
		if owners != 1 {
			t.Fatalf("%s is owned by %d shards", name, owners)
		}
	}
	for k, s := range sizes {
		if s < n/count-150 || s > n/count+150 {
			t.Errorf("shard %d has %d of %d names", k, s, n)
		}
	}
	if !All.Owns("x") || !(Spec{}).Owns("x") {
		t.Error("the whole job does not own every name")
	}
	// The assignment is FNV-1a 64 of the name, pinned: a worker retried
	// by a later segtune must own what the first one did.
	for _, c := range []struct {
		name      string
		count, of int
	}{{"a.png", 1000, 417}, {"a.png", 3, 2}, {"frame_000001.jpg", 1000, 445}, {"frame_000001.jpg", 3, 0}} {
		if got := Of(c.name, c.count); got != c.of {
			t.Errorf("Of(%q, %d) = %d, want %d", c.name, c.count, got, c.of)
		}
	}
}

func TestResolve(t *testing.T) {
	cases := []struct {
		flag  string
		count int
		env   func(string) string
		want  string // "K/N source" or "error: substring"
	}{
		{"", 0, env(), "0/1 "},
		{"1/3", 0, env("JOB_COMPLETION_INDEX", "2", "SLURM_ARRAY_TASK_ID", "5"), "1/3 shard"},
		{"1/3", 3, env(), "1/3 shard"},
		{"1/3", 4, env(), "error: disagree"},
		{"3/2", 0, env(), "error: --shard \"3/2\": the shard index must be from 0 to 1"},
		{"", 0, env("JOB_COMPLETION_INDEX", "2"), "error: --shards N"},
		{"", 5, env("JOB_COMPLETION_INDEX", "2"), "2/5 JOB_COMPLETION_INDEX"},
		{"", 2, env("JOB_COMPLETION_INDEX", "2"), "error: index must be from 0 to 1"},
		{"", 2, env("JOB_COMPLETION_INDEX", "x"), "error: not a number"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "7", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "5"), "2/4 SLURM_ARRAY_TASK_ID"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "8", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_STEP", "4"), "2/4 SLURM_ARRAY_TASK_ID"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_STEP", "4"), "error: not MIN, MIN+STEP"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_COUNT", "3", "SLURM_ARRAY_TASK_MIN", "1"), "error: --array=A-B"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "8", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_STEP", "0"), "error: SLURM_ARRAY_TASK_STEP=0: the step"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "8", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_STEP", "-2"), "error: SLURM_ARRAY_TASK_STEP=-2: the step"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "1"), "error: SLURM_ARRAY_TASK_COUNT is not"},
		{"", 3, env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0"), "error: disagrees"},
		{"", 3, env(), "error: without this worker's index"},
		{"", 1, env(), "0/1 "},
	}
	for i, c := range cases {
		s, err := Resolve(c.flag, c.count, c.env)
		got := s.String() + " " + s.Source
		if err != nil {
			got = "error: " + setting.Rename(err, flag).Error()
		}
		if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
			if err == nil || !strings.Contains(got, want) {
				t.Errorf("case %d: got %q, want an error containing %q", i, got, want)
			}
		} else if got != c.want {
			t.Errorf("case %d: got %q, want %q", i, got, c.want)
		}
	}
}

// Resolve's messages name the shard settings by key, and read whole as a
// CLI names them: these were its words when it took the flags' names.
func TestResolveNamesSettings(t *testing.T) {
	for _, c := range []struct {
		flag  string
		count int
		env   func(string) string
		want  string
	}{
		{"3/2", 0, env(), `--shard "3/2": the shard index must be from 0 to 1 (shards count from 0)`},
		{"1/3", 4, env(), `--shard 1/3 and --shards 4 disagree on the shard count`},
		{"", -1, env(), `--shards -1: must be from 1 to 1048576`},
		{"", 0, env("JOB_COMPLETION_INDEX", "2"), "JOB_COMPLETION_INDEX=2 is set (a Kubernetes Indexed Job), but Kubernetes does not tell its pods the number of completions: " +
			"give it with --shards N (the Job's spec.completions), or use --shard K/N (or --shard 0/1 to process every image)"},
		{"", 2, env("JOB_COMPLETION_INDEX", "2"), `"JOB_COMPLETION_INDEX=2 with --shards 2": the shard index must be from 0 to 1 (shards count from 0)`},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "1"), "SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_COUNT is not: is this a Slurm array task? (or give --shard K/N)"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_STEP", "4"),
			"SLURM_ARRAY_TASK_ID=9 (SLURM_ARRAY_TASK_MIN=0, SLURM_ARRAY_TASK_COUNT=4, step 4): the array's ids are not MIN, MIN+STEP, …; use --array=A-B[:S], or give --shard K/N"},
		{"", 0, env("SLURM_ARRAY_TASK_ID", "9", "SLURM_ARRAY_TASK_COUNT", "3", "SLURM_ARRAY_TASK_MIN", "1"),
			`"SLURM_ARRAY_TASK_ID=9 (SLURM_ARRAY_TASK_MIN=1, SLURM_ARRAY_TASK_COUNT=3, step 1)": the shard index must be from 0 to 2 (shards count from 0); use --array=A-B[:S] (not a list of ids), or give --shard K/N`},
		{"", 3, env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "0"), "--shards 3 disagrees with the Slurm array's SLURM_ARRAY_TASK_COUNT=4"},
		{"", 3, env(), "--shards 3 without this worker's index: give --shard K/N, or run as a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) or a Slurm array task (SLURM_ARRAY_TASK_ID)"},
	} {
		_, err := Resolve(c.flag, c.count, c.env)
		if err == nil || setting.Rename(err, flag).Error() != c.want {
			t.Errorf("%q %d: %v\nwant %s", c.flag, c.count, setting.Rename(err, flag), c.want)
		}
		if err != nil && strings.Contains(err.Error(), "--shard") {
			t.Errorf("%q %d: the library's own message names a flag: %v", c.flag, c.count, err)
		}
	}
}

// A Request notes a shard the environment gave (not one it was given),
// and keeps existing outputs when sharded unless told otherwise.
func TestRequest(t *testing.T) {
	var notes bytes.Buffer
	r := Request{Shards: 4}
	s, err := r.Resolve(env("JOB_COMPLETION_INDEX", "1"), &notes, flag)
	if err != nil || s != (Spec{Index: 1, Count: 4, Source: EnvK8sIndex}) {
		t.Fatalf("%+v, %v", s, err)
	}
	if got, want := notes.String(), "segtune: shard 1/4 from JOB_COMPLETION_INDEX (--shard 0/1 processes every image)\n"; got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	if !r.Skip(s) || (Request{SkipGiven: true}).Skip(s) || !(Request{SkipGiven: true, SkipExisting: true}).Skip(All) || r.Skip(All) {
		t.Error("Skip: on when sharded, else as given")
	}
	notes.Reset()
	if s, err := (Request{Shard: "0/2"}).Resolve(env("JOB_COMPLETION_INDEX", "1"), &notes, flag); err != nil || s.Source != SourceSetting || notes.Len() != 0 || !(Request{}).Skip(s) {
		t.Errorf("given: %+v, %v, notes %q", s, err, notes.String())
	}
}
