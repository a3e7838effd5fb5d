package main

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/internal/pathguard"
	"github.com/segtune/segtune/metrics"
)

// An eval shard's scores are written with --partial and combined by
// `segtune eval merge` (package evaluate). A single run goes through
// the same accumulator and the same summary, so merging the N shards of a
// job gives exactly the report one run over every image gives.

var confusionFlag = &cli.StringFlag{Name: "confusion", Usage: "write the confusion matrix into `DIR` as confusion.csv (pixel counts) and confusion.png (a heat map of normalised rows)"}

// checkConfusionDir refuses, before the work, a --confusion folder that is
// a file or one of the input folders named by inputs (whose files it
// could overwrite).
func checkConfusionDir(c *cli.Context, inputs ...string) error {
	dir := c.String("confusion")
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return cli.Exit(fmt.Sprintf("--confusion %s: not a folder", dir), 2)
	}
	at, err := pathguard.Resolve(dir)
	if err != nil {
		return cli.Exit(fmt.Sprintf("--confusion %s: %v", dir, err), 2)
	}
	for _, in := range inputs {
		v := c.String(in)
		if _, err := os.Stat(v); err != nil {
			continue // not a local folder
		}
		if r, err := pathguard.Resolve(v); err == nil && r == at {
			return cli.Exit(fmt.Sprintf("--confusion %s is the --%s folder; choose a folder of its own", dir, in), 2)
		}
	}
	return nil
}

// printEvalSummary prints the report (text or --json), writes
// --confusion's files and returns the exit error when images failed.
func printEvalSummary(c *cli.Context, sum evaluate.Summary) error {
	if dir := c.String("confusion"); dir != "" {
		if err := metrics.WriteConfusionFiles(dir, sum.Matrix, sum.ClassNames); err != nil {
			return fmt.Errorf("--confusion: %w", err)
		}
		notef(c, "segtune: wrote the confusion matrix to %s", dir)
	}
	if c.Bool("json") {
		if err := printJSON(os.Stdout, sum); err != nil {
			return err
		}
	} else {
		for _, f := range sum.Failures {
			fmt.Fprintf(os.Stderr, "segtune: skipped %s: %s\n", f.Path, f.Error)
		}
		sum.WriteText(os.Stdout)
	}
	if sum.Failed > 0 {
		return cli.Exit(fmt.Sprintf("%d of %d images failed", sum.Failed, sum.Images), 1)
	}
	return nil
}

func evalMergeCommand() *cli.Command {
	return &cli.Command{
		Name:      "merge",
		Usage:     "combine the --partial files of every eval shard into the report of the whole set",
		ArgsUsage: "PARTIAL...",
		Description: "Reads the partial files that `segtune eval --shard K/N --partial FILE` wrote (paths or URLs),\n" +
			"checks each (counts, images, shards; the matrix the sum of its images' cells) and that they are\n" +
			"the N shards of one evaluation (same model, data, settings; each shard once),\n" +
			"and prints exactly the report one run over every image gives (seconds: the shards' total).",
		Flags: []cli.Flag{jsonFlag, confusionFlag},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("eval merge: give the partial files of every shard", 2)
			}
			if err := checkConfusionDir(c); err != nil {
				return err
			}
			merged, err := evaluate.Merge(c.Context, c.Args().Slice())
			if err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return printEvalSummary(c, merged.Summary())
		},
	}
}
