package shard

import (
	"fmt"
	"io"

	"github.com/segtune/segtune/internal/setting"
)

// Request is a worker's share as its user asks for it: the shard and
// shards settings (Resolve), and whether outputs that exist and check out
// are kept.
type Request struct {
	Shard  string // "K/N"; "" reads the job engine's environment
	Shards int    // N, where the environment gives only K
	// SkipExisting keeps outputs that exist and check out; unless
	// SkipGiven, it is on whenever a shard was asked for (Skip).
	SkipExisting, SkipGiven bool
}

// Resolve is the shard r asks for (Resolve, getenv reading the
// environment). A shard taken from the environment is noted on notes, with
// the way out, the settings called name(key).
func (r Request) Resolve(getenv func(string) string, notes io.Writer, name func(key string) string) (Spec, error) {
	s, err := Resolve(r.Shard, r.Shards, getenv)
	if err == nil && s.Source != "" && s.Source != SourceSetting {
		fmt.Fprintln(notes, setting.Sprintf(name, "segtune: shard %s from %s ({shard} 0/1 processes every image)", s, s.Source))
	}
	return s, err
}

// Skip says whether outputs that exist and check out are kept under s:
// SkipExisting if given, else whenever a shard was asked for (so that a
// retried worker finishes the job).
func (r Request) Skip(s Spec) bool {
	if r.SkipGiven {
		return r.SkipExisting
	}
	return s.Source != ""
}
