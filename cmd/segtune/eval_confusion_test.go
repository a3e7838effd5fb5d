package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// eval prints and writes the confusion matrix: the red model calls the left
// half class 1, and the mask says only its left quarter is.
func TestEvalConfusion(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	imgs, masks := filepath.Join(dir, "images"), filepath.Join(dir, "masks")
	os.Mkdir(imgs, 0o755)
	os.Mkdir(masks, 0o755)
	writeImage(t, filepath.Join(imgs, "a.png"), 20, 10)
	labels := make([]uint8, 20*10)
	for i := range labels {
		if i%20 < 5 {
			labels[i] = 1
		}
	}
	if err := imageio.WriteMaskPNG(filepath.Join(masks, "a.png"), labels, 20, 10, nil); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conf")
	stdout, err := runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks,
		"--class-names", "road,car", "--confusion", conf, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var sum struct {
		MeanDice  float64   `json:"mean_dice"`
		Confusion [][]int64 `json:"confusion"`
		Classes   []struct {
			Dice, Precision, Recall float64
			Support                 int64
		}
	}
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	// Rows: road 100 right, 50 taken for car; car 50 right.
	if c := sum.Confusion; len(c) != 2 || c[0][0] != 100 || c[0][1] != 50 || c[1][0] != 0 || c[1][1] != 50 {
		t.Errorf("confusion %v", sum.Confusion)
	}
	car := sum.Classes[1]
	if car.Precision != 0.5 || car.Recall != 1 || math.Abs(car.Dice-2.0/3) > 1e-12 || car.Support != 50 {
		t.Errorf("car: %+v", car)
	}
	if want := (200.0/250 + 100.0/150) / 2; math.Abs(sum.MeanDice-want) > 1e-12 {
		t.Errorf("mean Dice %v, want %v", sum.MeanDice, want)
	}
	csv, err := os.ReadFile(filepath.Join(conf, "confusion.csv"))
	if err != nil || string(csv) != "true \\ predicted,road,car\nroad,100,50\ncar,0,50\n" {
		t.Errorf("confusion.csv: %q %v", csv, err)
	}
	if _, err := os.Stat(filepath.Join(conf, "confusion.png")); err != nil {
		t.Error(err)
	}

	text, err := runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--class-names", "road,car")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "0 road            66.7  33.3\n") || !strings.Contains(text, "1 car              0.0 100.0\n") {
		t.Errorf("text report:\n%s", text)
	}

	// The masks folder is refused as --confusion's, before any work.
	if _, err := runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--confusion", masks); err == nil ||
		!strings.Contains(err.Error(), "is the --masks folder") {
		t.Errorf("--confusion on the masks: %v", err)
	}
	// A rerun replaces its own files; a user's confusion.csv is refused
	// before any work and kept.
	if _, err := runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--confusion", conf); err != nil {
		t.Errorf("rerun into its own confusion folder: %v", err)
	}
	users := filepath.Join(dir, "users")
	os.Mkdir(users, 0o755)
	if err := os.WriteFile(filepath.Join(users, "confusion.csv"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "eval", "--model", model, "--images", imgs, "--masks", masks, "--confusion", users); err == nil ||
		!strings.Contains(err.Error(), "confusion.csv exists and was not written by segtune eval") {
		t.Errorf("--confusion over a user's confusion.csv: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(users, "confusion.csv")); string(b) != "mine\n" {
		t.Errorf("the user's confusion.csv now holds %q", b)
	}
	// With --data, the folder of its images is refused too.
	if _, err := runCLI(t, "eval", "--model", model, "--data", dir, "--confusion", imgs); err == nil ||
		!strings.Contains(err.Error(), "holds --data's files") {
		t.Errorf("--confusion on --data's image folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(imgs, "confusion.png")); err == nil {
		t.Error("confusion.png was written into the image folder")
	}
}

// eval --partial of a data folder holding two images of one file name in
// two sub-folders is refused before any work, naming both (a partial file
// records images by file name; eval merge refused it after the run);
// without --partial the evaluation runs.
func TestEvalPartialRefusesOneNameTwice(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	data := filepath.Join(dir, "data")
	for _, seq := range []string{"seq1", "seq2"} {
		for _, d := range []string{"images", "masks"} {
			if err := os.MkdirAll(filepath.Join(data, d, seq), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		writeImage(t, filepath.Join(data, "images", seq, "0001.png"), 20, 10)
		if err := imageio.WriteMaskPNG(filepath.Join(data, "masks", seq, "0001.png"), make([]uint8, 20*10), 20, 10, nil); err != nil {
			t.Fatal(err)
		}
	}
	part := filepath.Join(dir, "part.json")
	if _, err := runCLI(t, "eval", "--model", model, "--data", data, "--partial", part); err == nil ||
		!strings.Contains(err.Error(), "share the file name 0001.png") {
		t.Fatalf("eval --partial: %v, want a refusal naming 0001.png", err)
	}
	if _, err := os.Stat(part); err == nil {
		t.Error("a partial file was written for a refused run")
	}
	if _, err := runCLI(t, "eval", "--model", model, "--data", data); err != nil {
		t.Errorf("eval without --partial: %v", err)
	}
}
