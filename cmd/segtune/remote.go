package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Sharding and object storage for segment and eval: the flags, and the
// listings that feed the pipeline.

// shardOptions are what the shard flags set.
type shardOptions struct {
	Shard        string // --shard K/N
	Shards       int    // --shards N
	SkipExisting bool
	skipGiven    bool
}

// shardFlags bind --shard, --shards and --skip-existing into o.
func shardFlags(o *shardOptions) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "shard", Destination: &o.Shard, Usage: "process only shard K of N (K/N, from 0; images are split by a hash of their file name); " +
			"default: from JOB_COMPLETION_INDEX (with --shards) or SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, else every image"},
		&cli.IntFlag{Name: "shards", Usage: "the shard count N where the environment gives only the index (a Kubernetes Indexed Job's completions)", Destination: &o.Shards},
		&cli.BoolFlag{Name: "skip-existing", Usage: "skip images whose outputs exist and check out (default: on when sharded, so a retried worker finishes the job)", Destination: &o.SkipExisting,
			Action: func(*cli.Context, bool) error { o.skipGiven = true; return nil }},
	}
}

// resolve reads the shard from the flags and the job engines' variables.
// A shard taken from the environment is announced, with the way out.
func (o *shardOptions) resolve(c *cli.Context) (shard.Spec, error) {
	s, err := shard.Resolve(o.Shard, o.Shards, os.Getenv, "--shard", "--shards")
	if err != nil {
		return s, cli.Exit(err.Error(), 2)
	}
	if s.Source != "" && s.Source != "--shard" {
		notef(c, "segtune: shard %s from %s (--shard 0/1 processes every image)", s, s.Source)
	}
	return s, nil
}

// skipExisting says whether outputs that exist are checked and kept:
// --skip-existing if given, else whenever a shard was asked for.
func (o *shardOptions) skipExisting(s shard.Spec) bool {
	if o.skipGiven {
		return o.SkipExisting
	}
	return s.Source != ""
}

// openFolder opens the folder v that flag names (a path or a URL); errors
// name the flag. A local path that is a file, or a missing folder given
// as an input (input true), is refused here, before the model is read.
func openFolder(c *cli.Context, flag, v string, input bool) (*storage.Folder, error) {
	f, err := storage.OpenFolder(c.Context, v)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--%s %s: %v", flag, v, err), 2)
	}
	if f.IsLocal() {
		err := f.CheckList(c.Context)
		if !input && errors.Is(err, fs.ErrNotExist) {
			err = nil // outputs are made when written
		}
		if err != nil {
			f.Close()
			return nil, flagError(flag, f, err)
		}
	}
	return f, nil
}

// flagError names the flag in an error about its folder.
func flagError(flag string, f *storage.Folder, err error) error {
	if err == nil {
		return nil
	}
	return cli.Exit(fmt.Sprintf("--%s %s: %v", flag, f, err), 2)
}
