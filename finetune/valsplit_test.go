package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// cvatExport writes a CVAT "Segmentation mask 1.1" export of the toy data
// with its default subset only (no split): JPEGImages, SegmentationClass
// colour masks, labelmap.txt and ImageSets/Segmentation/default.txt.
func cvatExport(t *testing.T, root string, n int) {
	t.Helper()
	toy := toyData(t, filepath.Join(t.TempDir(), "toy"), "all", n, 9)
	red := color.RGBA{250, 50, 83, 255}
	var list []string
	for _, d := range []string{"JPEGImages", "SegmentationClass"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("%03d", i)
		list = append(list, name)
		img, err := imageio.ReadImage(filepath.Join(toy.Images, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := imageio.ReadMask(filepath.Join(toy.Masks, name+".png"), imageio.MaskOptions{NumClasses: 2, Ignore: 255})
		if err != nil {
			t.Fatal(err)
		}
		mask := image.NewRGBA(image.Rect(0, 0, m.Width, m.Height))
		for p, l := range m.Labels {
			c := color.RGBA{A: 255}
			if l == 1 {
				c = red
			}
			mask.Set(p%m.Width, p/m.Width, c)
		}
		if err := imageio.WritePNG(filepath.Join(root, "JPEGImages", name+".png"), img); err != nil {
			t.Fatal(err)
		}
		if err := imageio.WritePNG(filepath.Join(root, "SegmentationClass", name+".png"), mask); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "labelmap.txt"), "# label:color_rgb:parts:actions\nbackground:0,0,0::\nred:250,50,83::\n")
	writeFile(t, filepath.Join(root, "ImageSets", "Segmentation", "default.txt"), strings.Join(list, "\n")+"\n")
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A --val-split 0.2 fine-tune on a CVAT export without subsets validates
// every epoch on the 2 of its 10 images it held out, lists them in
// split.json, and an interrupted run resumes with the same split: its
// epochs are the uninterrupted run's.
func TestValSplitOfCVATExport(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	root := filepath.Join(dir, "cvat")
	cvatExport(t, root, 10)
	vs := &datalayout.ValSplit{Fraction: 0.2, Seed: 4}
	fd, err := OpenDataSplit(root, datalayout.Options{}, vs, false)
	if err != nil {
		t.Fatal(err)
	}
	if fd.Kept != 8 || fd.HeldOut != 2 || fd.Train.Format != "cvat" || !fd.Val.HeldOut {
		t.Fatalf("OpenDataSplit: %+v", fd)
	}
	cfg := toyConfig(t, dir)
	cfg.Train, cfg.Val, cfg.Epochs = fd.Train, fd.Val, 3 // 2 steps an epoch

	full := filepath.Join(dir, "full")
	var vals []int64
	hooks := Hooks{OnEpoch: func(e EpochInfo) {
		if e.Val != nil {
			vals = append(vals, e.Val.Pixels)
		}
	}}
	if _, err := Train(context.Background(), cfg, full, false, hooks); err != nil {
		t.Fatal(err)
	}
	if want := []int64{2 * 40 * 32, 2 * 40 * 32, 2 * 40 * 32}; !slices.Equal(vals, want) {
		t.Errorf("validated pixels per epoch %v, want %v (2 held-out 40x32 images each epoch)", vals, want)
	}
	var list SplitList
	b, err := os.ReadFile(filepath.Join(full, SplitFile))
	if err == nil {
		err = json.Unmarshal(b, &list)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Train) != 8 || len(list.Val) != 2 || list.Fraction != 0.2 || !strings.HasPrefix(list.Val[0], "JPEGImages/") {
		t.Errorf("%s: %+v", SplitFile, list)
	}
	for _, v := range list.Val {
		if slices.Contains(list.Train, v) {
			t.Errorf("%s is on both sides", v)
		}
	}

	out := filepath.Join(dir, "resumed")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Train(ctx, cfg, out, false, Hooks{OnEpoch: func(EpochInfo) { cancel() }}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("interrupted run: %v", err)
	}
	var logged strings.Builder
	if _, err := Train(context.Background(), cfg, out, true, Hooks{Log: &logged}); err != nil {
		t.Fatal(err)
	}
	if got, want := epochRows(t, out), epochRows(t, full); !reflect.DeepEqual(got, want) {
		t.Errorf("resumed run's epochs\n%+v\nwant the uninterrupted run's\n%+v", got, want)
	}
	if strings.Contains(logged.String(), "changed since the run started") {
		t.Errorf("resuming on the same data: %s", logged.String())
	}

	// Data that changed moves images between the sides: resuming says so.
	cvatExport(t, root, 12)
	if _, err := Train(context.Background(), cfg, out, true, Hooks{Log: &logged}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "changed since the run started") {
		t.Errorf("resuming on other data said nothing: %s", logged.String())
	}
}

// Data with a val split of its own refuses a held-out one; the folder pairs
// of --train-images are divided as a layout's samples are.
func TestValSplitRefusedWithAValSplit(t *testing.T) {
	root := t.TempDir()
	touchFiles(t, root, "images/train/a.jpg", "masks/train/a.png", "images/val/b.jpg", "masks/val/b.png")
	var ve *ValSplitExistsError
	if _, err := OpenDataSplit(root, datalayout.Options{}, &datalayout.ValSplit{Fraction: 0.2}, false); !errors.As(err, &ve) {
		t.Errorf("a held-out split of data with a val split: %v", err)
	}
	if _, err := OpenDataSplit(root, datalayout.Options{Split: "val"}, &datalayout.ValSplit{Fraction: 0.5}, false); err == nil || !strings.Contains(err.Error(), "1 samples in 1 group") {
		t.Errorf("one image to split: %v", err)
	}

	toy := toyData(t, t.TempDir(), "x", 10, 1)
	count := func(heldOut bool) int {
		ds, _, err := data.Open(context.Background(), data.Config{ImageDir: toy.Images, MaskDir: toy.Masks,
			ValSplit: &datalayout.ValSplit{Fraction: 0.3, Seed: 1}, HeldOut: heldOut})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Len()
	}
	if kept, held := count(false), count(true); kept != 7 || held != 3 {
		t.Errorf("folder pairs: kept %d, held out %d; want 7 and 3", kept, held)
	}
}
