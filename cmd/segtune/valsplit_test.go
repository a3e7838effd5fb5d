package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/runtime/runtimetest"
)

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// data split writes the held-out images as folders or lists, the same
// images both ways, and never into a folder that holds files.
func TestDataSplit(t *testing.T) {
	dir := t.TempDir()
	data := synthData(t, dir, 12, 2)
	folders, lists := filepath.Join(dir, "folders"), filepath.Join(dir, "lists")
	args := []string{"data", "split", "--data", data, "--split", "train", "--val", "0.25", "--split-seed", "3"}
	if _, err := runCLI(t, append(args, "--out", folders)...); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, append(args, "--out", lists, "--lists")...); err != nil {
		t.Fatal(err)
	}
	train, val := readLines(t, filepath.Join(lists, "train.txt")), readLines(t, filepath.Join(lists, "val.txt"))
	if len(train) != 9 || len(val) != 3 || !strings.HasPrefix(val[0], "images/train/") {
		t.Fatalf("lists: train %v, val %v", train, val)
	}
	var base []string
	for _, v := range val {
		base = append(base, filepath.Base(v))
	}
	if got := dirNames(t, filepath.Join(folders, "images", "val")); !slices.Equal(got, base) {
		t.Errorf("images/val holds %v, val.txt lists %v", got, base)
	}
	if got := dirNames(t, filepath.Join(folders, "masks", "train")); len(got) != 9 {
		t.Errorf("masks/train holds %v, want 9 masks", got)
	}
	if _, err := runCLI(t, append(args, "--out", lists, "--lists")...); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a second split into the lists' folder: %v", err)
	}
	if _, err := runCLI(t, "data", "split", "--data", data, "--split", "train", "--out", filepath.Join(dir, "x")); err == nil || !strings.Contains(err.Error(), "--val F") {
		t.Errorf("no --val: %v", err)
	}
}

// finetune --val-split validates on the held-out images, lists them, and
// --config replays the same split; it is refused with other validation
// data, and its companions alone are refused.
func TestFinetuneValSplit(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	data := synthData(t, dir, 12, 2)
	model := redModel(t, dir)
	common := []string{"--model", model, "--label-map", "1,2:1;*:0", "--crop", "32x32", "--batch", "3", "--epochs", "1", "--lr", "1e-3"}
	trainFolders := []string{"--train-images", filepath.Join(data, "images", "train"), "--train-masks", filepath.Join(data, "masks", "train")}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", data, "--val-split", "0.2"}, "--val-split: " + data + " has a validation split (val) already"},
		{append(slices.Clone(trainFolders), "--val-split", "0.2", "--val-images", filepath.Join(data, "images", "val"), "--val-masks", filepath.Join(data, "masks", "val")), "--val-split and --val-images"},
		{append(slices.Clone(trainFolders), "--split-by", "folder"), "--split-by goes with --val-split"},
		{append(slices.Clone(trainFolders), "--val-split", "1.5"), "--val-split 1.5: the fraction of the images held out for validation must be in (0, 1)"},
	} {
		args := append(append([]string{"finetune", "--out", filepath.Join(dir, "bad")}, common...), bad.args...)
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: %v, want %q", bad.args, err, bad.want)
		}
	}
	run := filepath.Join(dir, "run")
	args := append(append([]string{"finetune", "--out", run}, common...), append(trainFolders, "--val-split", "0.25", "--split-seed", "7")...)
	printed, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(printed, "split.json") {
		t.Errorf("the summary does not name split.json: %s", printed)
	}
	want, err := os.ReadFile(filepath.Join(run, "split.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(run, "best.ckpt")); err != nil {
		t.Errorf("no best.ckpt: the run did not validate (%v)", err)
	}
	again := filepath.Join(dir, "again")
	if _, err := runCLI(t, "finetune", "--config", filepath.Join(run, "config.json"), "--out", again); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(again, "split.json")); err != nil || string(got) != string(want) {
		t.Errorf("--config's split.json %s (%v), want the run's %s", got, err, want)
	}
}
