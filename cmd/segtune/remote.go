package main

import (
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/shard"
	"github.com/segtune/segtune/internal/storage"
)

// Sharding and object storage for segment and eval: the flags, and the
// folders that feed the pipeline.

// shardOptions are what the shard flags set.
type shardOptions struct{ shard.Request }

// shardFlags bind --shard, --shards and --skip-existing into o.
func shardFlags(o *shardOptions) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "shard", Destination: &o.Shard, Usage: "process only shard K of N (K/N, from 0; images are split by a hash of their file name); " +
			"default: from JOB_COMPLETION_INDEX (with --shards) or SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, else every image"},
		&cli.IntFlag{Name: "shards", Usage: "the shard count N where the environment gives only the index (a Kubernetes Indexed Job's completions)", Destination: &o.Shards},
		&cli.BoolFlag{Name: "skip-existing", Usage: "skip images whose outputs exist and check out (default: on when sharded, so a retried worker finishes the job)", Destination: &o.SkipExisting,
			Action: func(*cli.Context, bool) error { o.SkipGiven = true; return nil }},
	}
}

// resolve reads the shard from the flags and the job engines' variables
// (shard.Request.Resolve); a bad one exits with status 2.
func (o *shardOptions) resolve(c *cli.Context) (shard.Spec, error) {
	s, err := o.Request.Resolve(os.Getenv, noticeWriter(c), flagOf)
	return s, setting.Usage(err)
}

// openFolder opens the folder v that flag names (storage.OpenSetting): a
// folder refused exits with status 2.
func openFolder(c *cli.Context, flag, v string, input bool) (*storage.Folder, error) {
	f, err := storage.OpenSetting(c.Context, flag, v, input)
	return f, setting.Usage(err)
}
