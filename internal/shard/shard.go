// Package shard splits a job's inputs among N independent workers (a
// Kubernetes Indexed Job, a Slurm job array, or processes started by hand)
// so that together they cover every input exactly once, with no
// coordination between them.
//
// An input belongs to shard FNV-1a-64(name) mod N, where name is its file
// name inside the input folder. The assignment depends on the name alone —
// not on its position in the listing — so that
//
//   - it can be decided while a listing is streamed (an object store lists
//     millions of keys a page at a time, and no worker holds the list), and
//   - a worker that is retried later, after images were added to or removed
//     from the folder, still owns exactly the images it owned before among
//     those that remain: no image falls between two shards, and none is done
//     twice, whatever each worker's listing saw.
//
// The price is balance: shards get n/N ± about √(n/N) images rather than
// exactly ⌊n/N⌋ or ⌈n/N⌉, which matters only for small sets.
package shard

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/segtune/segtune/internal/setting"
)

// Spec is one worker's share: shard Index of Count (0 ≤ Index < Count).
// The zero value, like 0/1, is the whole job.
type Spec struct {
	Index int `json:"index"`
	Count int `json:"count"`
	// Source says where the spec came from ("--shard", or the
	// environment variables read); not part of the identity.
	Source string `json:"-"`
}

// All is the whole job as one shard.
var All = Spec{Index: 0, Count: 1}

// Sharded reports whether s is a proper part of the job (Count > 1).
func (s Spec) Sharded() bool { return s.Count > 1 }

// String is "K/N".
func (s Spec) String() string {
	if s.Count == 0 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}

// Owns reports whether the input called name belongs to this shard.
func (s Spec) Owns(name string) bool {
	if s.Count <= 1 {
		return true
	}
	return Of(name, s.Count) == s.Index
}

// Of returns the shard (0..count-1) that the input called name belongs to.
func Of(name string, count int) int {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64() % uint64(count))
}

// MaxCount bounds the shard count (Kubernetes allows 10⁵ completions for
// an Indexed Job; Slurm's MaxArraySize defaults to 1001).
const MaxCount = 1 << 20

// Parse reads "K/N" (0 ≤ K < N ≤ MaxCount).
func Parse(v string) (Spec, error) {
	k, n, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return Spec{}, fmt.Errorf("%q is not K/N (shard K of N, counting from 0, e.g. 0/4)", v)
	}
	idx, err1 := strconv.Atoi(strings.TrimSpace(k))
	cnt, err2 := strconv.Atoi(strings.TrimSpace(n))
	if err1 != nil || err2 != nil {
		return Spec{}, fmt.Errorf("%q is not K/N with whole numbers K and N (e.g. 0/4)", v)
	}
	return check(idx, cnt, v)
}

func check(idx, cnt int, v string) (Spec, error) {
	if why := outOfRange(idx, cnt); why != "" {
		return Spec{}, fmt.Errorf("%q: %s", v, why)
	}
	return Spec{Index: idx, Count: cnt}, nil
}

// outOfRange says why shard idx of cnt is none ("" when it is one).
func outOfRange(idx, cnt int) string {
	switch {
	case cnt < 1 || cnt > MaxCount:
		return fmt.Sprintf("the shard count must be from 1 to %d", MaxCount)
	case idx < 0 || idx >= cnt:
		return fmt.Sprintf("the shard index must be from 0 to %d (shards count from 0)", cnt-1)
	}
	return ""
}

// Environment variables that job engines set for each worker.
const (
	// EnvK8sIndex is set by Kubernetes in every pod of an Indexed Job
	// (completionMode: Indexed). Kubernetes exposes no count: the Job's
	// spec.completions is not available to the pod, so the count has to
	// be given (the shards setting).
	EnvK8sIndex = "JOB_COMPLETION_INDEX"
	// Slurm job arrays: the task's id, the number of tasks, the lowest id
	// and the step between ids (--array=MIN-MAX:STEP).
	EnvSlurmID    = "SLURM_ARRAY_TASK_ID"
	EnvSlurmCount = "SLURM_ARRAY_TASK_COUNT"
	EnvSlurmMin   = "SLURM_ARRAY_TASK_MIN"
	EnvSlurmStep  = "SLURM_ARRAY_TASK_STEP"
)

// SourceSetting is the Source of a spec that the shard setting gave.
const SourceSetting = "shard"

// Resolve decides the shard of this worker: flag ("K/N", the shard
// setting) wins; otherwise a Kubernetes Indexed Job's index with count
// (the shards setting; required there, as Kubernetes does not tell the
// count); otherwise a Slurm array task's position in its array (the count,
// if given, must agree); otherwise the whole job. getenv reads the
// environment (os.Getenv). Errors name the variable at fault, and the
// settings by their keys, shard and shards (setting.Messagef).
func Resolve(flag string, count int, getenv func(string) string) (Spec, error) {
	if flag != "" {
		s, err := Parse(flag)
		if err != nil {
			return Spec{}, setting.Messagef("{shard} %w", err)
		}
		if count != 0 && count != s.Count {
			return Spec{}, setting.Messagef("{shard} %s and {shards} %d disagree on the shard count", flag, count)
		}
		s.Source = SourceSetting
		return s, nil
	}
	if count < 0 || count > MaxCount {
		return Spec{}, setting.Messagef("{shards} %d: must be from 1 to %d", count, MaxCount)
	}
	if v := getenv(EnvK8sIndex); v != "" {
		return indexedJob(v, count)
	}
	if v := getenv(EnvSlurmID); v != "" {
		s, err := slurm(getenv)
		if err != nil {
			return Spec{}, err
		}
		if count != 0 && count != s.Count {
			return Spec{}, setting.Messagef("{shards} %d disagrees with the Slurm array's %s=%d", count, EnvSlurmCount, s.Count)
		}
		return s, nil
	}
	if count > 1 {
		return Spec{}, setting.Messagef("{shards} %d without this worker's index: give {shard} K/N, or run as a Kubernetes Indexed Job (%s) or a Slurm array task (%s)",
			count, EnvK8sIndex, EnvSlurmID)
	}
	return All, nil
}

// indexedJob is shard v (EnvK8sIndex's value) of count.
func indexedJob(v string, count int) (Spec, error) {
	idx, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return Spec{}, fmt.Errorf("%s=%q is not a number", EnvK8sIndex, v)
	}
	if count == 0 {
		return Spec{}, setting.Messagef("%s=%s is set (a Kubernetes Indexed Job), but Kubernetes does not tell its pods the number of completions: "+
			"give it with {shards} N (the Job's spec.completions), or use {shard} K/N (or {shard} 0/1 to process every image)", EnvK8sIndex, v)
	}
	if why := outOfRange(idx, count); why != "" {
		// v is a number (spaces aside): the quoted words hold no % or braces but {shards}.
		return Spec{}, setting.Messagef(strconv.Quote(fmt.Sprintf("%s=%s with {shards} %d", EnvK8sIndex, v, count))+": %s", why)
	}
	return Spec{Index: idx, Count: count, Source: EnvK8sIndex}, nil
}

// slurm maps a Slurm array task to its shard: tasks --array=MIN-MAX:STEP
// have ids MIN, MIN+STEP, …, and the task with id MIN+K·STEP is shard K of
// SLURM_ARRAY_TASK_COUNT. Arrays of listed ids (--array=1,5,7) have no such
// order and are refused, naming the shard setting as the way out.
func slurm(getenv func(string) string) (Spec, error) {
	num := func(name string, def int, required bool) (int, error) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			if required {
				return 0, setting.Messagef("%s is set but %s is not: is this a Slurm array task? (or give {shard} K/N)", EnvSlurmID, name)
			}
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("%s=%q is not a number", name, v)
		}
		return n, nil
	}
	id, err := num(EnvSlurmID, 0, true)
	if err != nil {
		return Spec{}, err
	}
	count, err := num(EnvSlurmCount, 0, true)
	if err != nil {
		return Spec{}, err
	}
	lo, err := num(EnvSlurmMin, 0, true)
	if err != nil {
		return Spec{}, err
	}
	step, err := num(EnvSlurmStep, 1, false)
	if err != nil {
		return Spec{}, err
	}
	if step < 1 {
		return Spec{}, fmt.Errorf("%s=%d: the step between array task ids must be at least 1", EnvSlurmStep, step)
	}
	desc := fmt.Sprintf("%s=%d (%s=%d, %s=%d, step %d)", EnvSlurmID, id, EnvSlurmMin, lo, EnvSlurmCount, count, step)
	if (id-lo)%step != 0 || id < lo {
		return Spec{}, setting.Messagef("%s: the array's ids are not MIN, MIN+STEP, …; use --array=A-B[:S], or give {shard} K/N", desc)
	}
	s, err := check((id-lo)/step, count, desc)
	if err != nil {
		return Spec{}, setting.Messagef("%w; use --array=A-B[:S] (not a list of ids), or give {shard} K/N", err)
	}
	s.Source = EnvSlurmID
	return s, nil
}
