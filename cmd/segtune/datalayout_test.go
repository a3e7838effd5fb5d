package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/segtune/segtune/deploy"
	"github.com/segtune/segtune/evaluate"
	"github.com/segtune/segtune/finetune/data"
	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/datalayout"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// labelled is a canonical pair: an image file and its labels (0, 1 and
// the ignore label 255).
type labelled struct {
	name, image string
	labels      []uint8
	w, h        int
}

// layoutCase is one data set built in a layout, and the label map that
// gives back the canonical labels.
type layoutCase struct {
	name, root, format, labelMap string
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func link(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(src, dst); err != nil {
		t.Fatal(err)
	}
}

// writeGray writes labels as an 8-bit grey PNG, each value mapped by to.
func writeGray(t *testing.T, path string, p labelled, to func(uint8) uint8) {
	t.Helper()
	g := image.NewGray(image.Rect(0, 0, p.w, p.h))
	for i, l := range p.labels {
		g.Pix[i] = to(l)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, g); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.Bytes())
}

// syntheticPairs writes n JPEG images of red and green blocks with their
// labels (1 where red, 0 where green, 255 on a border column).
func syntheticPairs(t *testing.T, dir string, n int) []labelled {
	rng := rand.New(rand.NewPCG(7, 9))
	var out []labelled
	for k := range n {
		w, h := 24+2*k, 16
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		p := labelled{name: "syn_" + string(rune('a'+k)), w: w, h: h, labels: make([]uint8, w*h)}
		for by := 0; by < h; by += 8 {
			for bx := 0; bx < w; bx += 8 {
				red := rng.IntN(2) == 1
				for y := by; y < min(by+8, h); y++ {
					for x := bx; x < min(bx+8, w); x++ {
						c := color.RGBA{20, 200, 20, 255}
						if red {
							c, p.labels[y*w+x] = color.RGBA{200, 20, 20, 255}, 1
						}
						if x == 0 {
							p.labels[y*w+x] = 255
						}
						img.Set(x, y, c)
					}
				}
			}
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
			t.Fatal(err)
		}
		p.image = filepath.Join(dir, p.name+".jpg")
		writeFile(t, p.image, buf.Bytes())
		out = append(out, p)
	}
	return out
}

// camvidPairs takes n CamVid val images with their masks mapped to person
// (Pedestrian, Bicyclist) = 1, Unlabelled = 255, the rest 0.
func camvidPairs(t *testing.T, n int) []labelled {
	camvid := testassets.Require(t, "data", "camvid")
	imgs, err := imageio.ListImages(filepath.Join(camvid, "images", "val"))
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := imageio.ParseLabelMap("9,10:1;11:255;*:0")
	var out []labelled
	for _, img := range imgs[:n] {
		name := strings.TrimSuffix(filepath.Base(img), ".png")
		m, err := imageio.ReadMask(filepath.Join(camvid, "masks", "val", name+".png"), imageio.MaskOptions{Map: lm})
		if err != nil {
			t.Fatal(err)
		}
		labels, _ := m.Uint8(nil)
		out = append(out, labelled{name: name, image: img, labels: labels, w: m.Width, h: m.Height})
	}
	return out
}

// buildLayouts writes pairs as canonical folders (dir/canon/images/val,
// dir/canon/masks/val) and in every other layout, split val, each under
// dir/NAME; images are links to the same files.
func buildLayouts(t *testing.T, dir string, pairs []labelled) []layoutCase {
	t.Helper()
	same := func(l uint8) uint8 { return l }
	csID := func(l uint8) uint8 { // trainIds 0, 1 → labelIds road 7, sidewalk 8; ignore → unlabeled 0
		return map[uint8]uint8{0: 7, 1: 8, 255: 0}[l]
	}
	ade := func(l uint8) uint8 { // reduce zero label undone: k → k+1, ignore → 0
		if l == 255 {
			return 0
		}
		return l + 1
	}
	var voclist []string
	for i, p := range pairs {
		ext := filepath.Ext(p.image)
		link(t, p.image, filepath.Join(dir, "canon", "images", "val", p.name+ext))
		writeGray(t, filepath.Join(dir, "canon", "masks", "val", p.name+".png"), p, same)

		link(t, p.image, filepath.Join(dir, "mmseg", "img_dir", "val", p.name+ext))
		writeGray(t, filepath.Join(dir, "mmseg", "ann_dir", "val", p.name+".png"), p, same)

		seq := []string{"seq1", "seq2"}[i%2]
		link(t, p.image, filepath.Join(dir, "nested", "val", "images", seq, p.name+ext))
		writeGray(t, filepath.Join(dir, "nested", "val", "labels", seq, p.name+"_mask.png"), p, same)

		city := filepath.Join("val", []string{"aachen", "bremen"}[i%2])
		link(t, p.image, filepath.Join(dir, "cityscapes", "leftImg8bit", city, p.name+"_leftImg8bit"+ext))
		writeGray(t, filepath.Join(dir, "cityscapes", "gtFine", city, p.name+"_gtFine_labelIds.png"), p, csID)
		writeGray(t, filepath.Join(dir, "cityscapes", "gtFine", city, p.name+"_gtFine_instanceIds.png"), p, func(uint8) uint8 { return 99 })
		writeFile(t, filepath.Join(dir, "cityscapes", "gtFine", city, p.name+"_gtFine_polygons.json"), []byte("{}"))

		link(t, p.image, filepath.Join(dir, "voc", "JPEGImages", p.name+ext))
		if err := os.MkdirAll(filepath.Join(dir, "voc", "SegmentationClass"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := imageio.WriteMaskPNG(filepath.Join(dir, "voc", "SegmentationClass", p.name+".png"), p.labels, p.w, p.h, nil); err != nil {
			t.Fatal(err)
		}
		voclist = append(voclist, p.name)

		link(t, p.image, filepath.Join(dir, "ade", "images", "validation", p.name+ext))
		writeGray(t, filepath.Join(dir, "ade", "annotations", "validation", p.name+".png"), p, ade)

		link(t, p.image, filepath.Join(dir, "labelme", "images", p.name+ext))
		writeLabelMe(t, filepath.Join(dir, "labelme", "val", p.name+".json"), "../images/"+p.name+ext, p, i%2 == 1)
	}
	// Layouts carry their other splits and the files around them.
	link(t, pairs[0].image, filepath.Join(dir, "voc", "JPEGImages", "2008_000001"+filepath.Ext(pairs[0].image))) // detection only
	writeFile(t, filepath.Join(dir, "voc", "ImageSets", "Segmentation", "val.txt"), []byte(strings.Join(voclist, "\n")+"\n"))
	writeFile(t, filepath.Join(dir, "voc", "ImageSets", "Segmentation", "train.txt"), []byte(voclist[0]+"\n"))
	link(t, pairs[0].image, filepath.Join(dir, "cityscapes", "leftImg8bit", "train", "x", "t_leftImg8bit"+filepath.Ext(pairs[0].image)))
	writeGray(t, filepath.Join(dir, "cityscapes", "gtFine", "train", "x", "t_gtFine_labelIds.png"), pairs[0], csID)
	link(t, pairs[0].image, filepath.Join(dir, "ade", "images", "training", "t"+filepath.Ext(pairs[0].image)))
	writeGray(t, filepath.Join(dir, "ade", "annotations", "training", "t.png"), pairs[0], ade)
	link(t, pairs[0].image, filepath.Join(dir, "labelme", "train", "t"+filepath.Ext(pairs[0].image)))
	writeLabelMe(t, filepath.Join(dir, "labelme", "train", "t.json"), "t"+filepath.Ext(pairs[0].image), pairs[0], false)
	writeFile(t, filepath.Join(dir, "labelme", "labels.txt"), []byte("__ignore__\n_background_\nred\n"))
	return []layoutCase{
		{"canonical folders", filepath.Join(dir, "canon"), "folders", ""},
		{"mmseg", filepath.Join(dir, "mmseg"), "folders", ""},
		{"nested with _mask", filepath.Join(dir, "nested"), "folders", ""},
		{"cityscapes", filepath.Join(dir, "cityscapes"), "cityscapes", "cityscapes"},
		{"voc", filepath.Join(dir, "voc"), "voc", "voc"},
		{"ade20k", filepath.Join(dir, "ade"), "ade20k", "ade20k"},
		{"labelme", filepath.Join(dir, "labelme"), "labelme", ""},
	}
}

// writeLabelMe writes p's labels as a LabelMe file (as labelme 5 saves
// it) of rectangles: one per run of a label in a row, grown down over
// rows with the same run; red (1) first, then __ignore__ (255) over it.
// A rectangle's corners are pixels, both included.
func writeLabelMe(t *testing.T, path, imagePath string, p labelled, embed bool) {
	t.Helper()
	type shape struct {
		Label     string       `json:"label"`
		Points    [][2]float64 `json:"points"`
		GroupID   *int         `json:"group_id"`
		ShapeType string       `json:"shape_type"`
		Flags     struct{}     `json:"flags"`
		Mask      *string      `json:"mask"`
	}
	var shapes []shape
	for _, l := range []struct {
		name  string
		label uint8
	}{{"red", 1}, {"__ignore__", 255}} {
		open := map[[2]int]int{} // run x0,x1 → its rectangle, while it goes on down
		for y := range p.h {
			next := map[[2]int]int{}
			for x := 0; x < p.w; x++ {
				if p.labels[y*p.w+x] != l.label {
					continue
				}
				x1 := x
				for x1+1 < p.w && p.labels[y*p.w+x1+1] == l.label {
					x1++
				}
				run := [2]int{x, x1}
				if k, ok := open[run]; ok {
					shapes[k].Points[1][1] = float64(y)
					next[run] = k
				} else {
					next[run] = len(shapes)
					shapes = append(shapes, shape{Label: l.name, ShapeType: "rectangle",
						Points: [][2]float64{{float64(x), float64(y)}, {float64(x1) + 0.5, float64(y) + 0.25}}})
				}
				x = x1
			}
			open = next
		}
	}
	var data *string
	if embed {
		img, err := os.ReadFile(p.image)
		if err != nil {
			t.Fatal(err)
		}
		s := base64.StdEncoding.EncodeToString(img)
		data = &s
	}
	doc, err := json.MarshalIndent(map[string]any{"version": "5.5.0", "flags": map[string]any{}, "shapes": shapes,
		"imagePath": imagePath, "imageData": data, "imageHeight": p.h, "imageWidth": p.w}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, doc)
}

// evalIoUs runs eval with args and returns its per-class IoUs and image count.
func evalIoUs(t *testing.T, args ...string) ([]*float64, int) {
	t.Helper()
	stdout, err := runCLI(t, append([]string{"eval", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("eval %v: %v", args, err)
	}
	var sum evaluate.Summary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil {
		t.Fatalf("%q: %v", stdout, err)
	}
	var ious []*float64
	for _, c := range sum.Classes {
		ious = append(ious, c.IoU)
	}
	return ious, sum.Images
}

func sameIoUs(a, b []*float64) bool {
	return slices.EqualFunc(a, b, func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) })
}

// Acceptance: each layout, read by --data and --split with its label
// preset, scores exactly as the canonical folders do (the formats are
// lossless), on synthetic JPEGs and on CamVid.
func TestEvalDataLayoutsScoreLikeFolders(t *testing.T) {
	runtimetest.Require(t)
	sources := map[string]func(t *testing.T, dir string) []labelled{
		"synthetic": func(t *testing.T, dir string) []labelled { return syntheticPairs(t, filepath.Join(dir, "src"), 5) },
		"camvid":    func(t *testing.T, _ string) []labelled { return camvidPairs(t, 3) },
	}
	for name, source := range sources {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			model := redModel(t, dir)
			pairs := source(t, dir)
			cases := buildLayouts(t, dir, pairs)
			want, n := evalIoUs(t, "--model", model, "--images", filepath.Join(dir, "canon", "images", "val"),
				"--masks", filepath.Join(dir, "canon", "masks", "val"))
			if n != len(pairs) || want[0] == nil || want[1] == nil {
				t.Fatalf("canonical folders: %d images, IoUs %v", n, want)
			}
			for _, c := range cases {
				args := []string{"--model", model, "--data", c.root, "--split", "val"}
				if c.labelMap != "" {
					args = append(args, "--label-map", c.labelMap)
				}
				got, n := evalIoUs(t, args...)
				if n != len(pairs) || !sameIoUs(got, want) {
					t.Errorf("%s: %d images, IoU %v; the canonical folders give %d, %v", c.name, n, ious(got), len(pairs), ious(want))
				}
			}
		})
	}
}

func ious(xs []*float64) []float64 {
	var out []float64
	for _, x := range xs {
		if x != nil {
			out = append(out, *x)
		}
	}
	return out
}

func TestFinetuneFromDataLayouts(t *testing.T) {
	runtimetest.Require(t)
	dir := t.TempDir()
	model := redModel(t, dir)
	cases := buildLayouts(t, dir, syntheticPairs(t, filepath.Join(dir, "src"), 4))
	for _, c := range append(cases[3:5:5], cases[6]) { // cityscapes, voc, labelme: train and val splits, label presets
		run := filepath.Join(dir, "run-"+c.format)
		if _, err := runCLI(t, "finetune", "--model", model, "--data", c.root, "--label-map", c.labelMap,
			"--crop", "16x16", "--batch", "1", "--epochs", "1", "--scale-min", "1", "--scale-max", "1"); err == nil {
			t.Fatal("finetune without --out ran")
		}
		if _, err := runCLI(t, "finetune", "--model", model, "--data", c.root, "--label-map", c.labelMap, "--out", run,
			"--crop", "16x16", "--batch", "1", "--epochs", "1", "--scale-min", "1", "--scale-max", "1"); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cfg, err := os.ReadFile(filepath.Join(run, "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`"format": "` + c.format + `"`, `"split": "train"`, `"split": "val"`} {
			if !bytes.Contains(cfg, []byte(want)) {
				t.Errorf("%s: config.json lacks %s:\n%s", c.name, want, cfg)
			}
		}
		if _, err := os.Stat(filepath.Join(run, "model.onnx")); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// The run folder never goes inside the data.
	_, err := runCLI(t, "finetune", "--model", model, "--data", cases[3].root, "--out", filepath.Join(cases[3].root, "gtFine", "run"),
		"--crop", "16x16", "--batch", "1", "--epochs", "1")
	if err == nil || !strings.Contains(err.Error(), "inside the data folder") {
		t.Errorf("--out inside --data: %v", err)
	}
}

// Bad files are named: by eval and finetune before any work, and by data
// check with what is wrong with each.
func TestDataCheckNamesBadFiles(t *testing.T) {
	dir := t.TempDir()
	pairs := syntheticPairs(t, filepath.Join(dir, "src"), 4)
	root := buildLayouts(t, dir, pairs)[0].root
	imgs, masks := filepath.Join(root, "images", "val"), filepath.Join(root, "masks", "val")
	link(t, pairs[0].image, filepath.Join(imgs, "lonely.jpg"))
	writeFile(t, filepath.Join(masks, "syn_b.png"+".tmp"), nil) // not an image: not data
	writeFile(t, filepath.Join(masks, "orphan.png"), nil)
	if err := os.Remove(filepath.Join(masks, "syn_b.png")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(masks, "syn_b.png"), []byte("\x89PNG\r\n\x1a\nbroken"))
	seven := pairs[2]
	seven.labels = slices.Clone(seven.labels)
	seven.labels[5] = 7
	writeGray(t, filepath.Join(masks, "syn_c.png"), seven, func(l uint8) uint8 { return l })
	small := pairs[3]
	small.w, small.labels = small.w-2, small.labels[:(small.w-2)*small.h]
	writeGray(t, filepath.Join(masks, "syn_d.png"), small, func(l uint8) uint8 { return l })

	stdout, err := runCLI(t, "data", "check", "--data", root, "--split", "val", "--classes", "2", "--class-names", "green,red", "--json")
	if err == nil || !strings.Contains(err.Error(), "5 files named above") {
		t.Fatalf("data check: %v", err)
	}
	var reports []data.Report
	if err := json.Unmarshal([]byte(stdout), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("%q: %v", stdout, err)
	}
	r := reports[0]
	var named []string
	for _, u := range r.Unmatched {
		named = append(named, filepath.Base(u.Path))
	}
	if !slices.Equal(named, []string{"lonely.jpg", "orphan.png"}) {
		t.Errorf("unmatched %v", r.Unmatched)
	}
	for _, want := range []string{"syn_b.png", "syn_c.png: label 7", "syn_d.png is 28x16"} {
		if !slices.ContainsFunc(r.Problems, func(p data.FileProblem) bool { return strings.Contains(p.Error, want) }) {
			t.Errorf("no problem says %q: %v", want, r.Problems)
		}
	}
	// The one good pair's histogram, counted here from its labels.
	var counts [2]int64
	for _, l := range pairs[0].labels {
		if l < 2 {
			counts[l]++
		}
	}
	if r.Pairs != 1 || len(r.Classes) != 2 || r.Classes[1].Name != "red" {
		t.Fatalf("report %+v", r)
	}
	for k, cc := range r.Classes {
		if cc.Pixels != counts[k] || (counts[k] > 0) != (cc.Images == 1) {
			t.Errorf("class %d: %d pixels in %d images, want %d", k, cc.Pixels, cc.Images, counts[k])
		}
		if cc.Size != nil && cc.Size.Median != float64(counts[k])/float64(counts[0]+counts[1]) {
			t.Errorf("class %d: size %+v", k, cc.Size)
		}
	}
	// eval and finetune refuse the unmatched files before any work.
	for _, args := range [][]string{
		{"eval", "--model", filepath.Join(dir, "none.onnx"), "--data", root, "--split", "val"},
		{"finetune", "--model", filepath.Join(dir, "none.onnx"), "--data", root, "--split", "val", "--out", filepath.Join(dir, "run")},
	} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "lonely.jpg: image without a mask") ||
			!strings.Contains(err.Error(), "orphan.png: mask without an image") {
			t.Errorf("%s: %v", args[0], err)
		}
	}
}

func TestDataCheckAllSplits(t *testing.T) {
	dir := t.TempDir()
	c := buildLayouts(t, dir, syntheticPairs(t, filepath.Join(dir, "src"), 3))[4] // voc: train and val lists
	stdout, err := runCLI(t, "data", "check", "--data", c.root, "--label-map", "voc", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var reports []data.Report
	if err := json.Unmarshal([]byte(stdout), &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports) != 2 || reports[0].Split != "train" || reports[0].Pairs != 1 || reports[1].Split != "val" || reports[1].Pairs != 3 {
		t.Errorf("reports %+v", reports)
	}
}

// convert writes canonical folders that hold the same images, byte for
// byte, and the labels after the preset; never into its input.
func TestDataConvert(t *testing.T) {
	dir := t.TempDir()
	pairs := syntheticPairs(t, filepath.Join(dir, "src"), 3)
	cases := buildLayouts(t, dir, pairs)
	for _, c := range cases[3:] {
		out := filepath.Join(dir, "out-"+c.format)
		if _, err := runCLI(t, "data", "convert", "--data", c.root, "--split", "val", "--label-map", c.labelMap, "--out", out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, p := range pairs {
			img, err := os.ReadFile(filepath.Join(out, "images", "val", p.name+".jpg"))
			src, _ := os.ReadFile(p.image)
			if err != nil || !bytes.Equal(img, src) {
				t.Errorf("%s: image %s: %v", c.name, p.name, err)
			}
			m, err := imageio.ReadMask(filepath.Join(out, "masks", "val", p.name+".png"), imageio.MaskOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := m.Uint8(nil)
			if !bytes.Equal(got, p.labels) {
				t.Errorf("%s: mask %s differs from the canonical labels", c.name, p.name)
			}
		}
	}
	for _, bad := range []struct{ out, want string }{
		{filepath.Join(cases[0].root, "converted"), "overlap"},
		{cases[0].root, "overlap"},
		{filepath.Join(dir, "out-voc"), "not empty"},
	} {
		if _, err := runCLI(t, "data", "convert", "--data", cases[0].root, "--out", bad.out, "--split", "val"); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("--out %s: %v", bad.out, err)
		}
	}
}

// --calibrate takes a data folder: its training split's images.
func TestCalibrationImagesFromDataFolder(t *testing.T) {
	dir := t.TempDir()
	cases := buildLayouts(t, dir, syntheticPairs(t, filepath.Join(dir, "src"), 3))
	calibrationImages := func(dir string) ([]string, error) {
		return deploy.CalibrationImages(dir, datalayout.Options{}, false, func(*datalayout.Set) {})
	}
	imgs, err := calibrationImages(cases[5].root) // ade20k: images/training holds one
	if err != nil || len(imgs) != 1 || filepath.Base(imgs[0]) != "t.jpg" {
		t.Errorf("ade20k: %v, %v", imgs, err)
	}
	flat := filepath.Join(dir, "src")
	if imgs, err := calibrationImages(flat); err != nil || len(imgs) != 3 {
		t.Errorf("a folder of images: %v, %v", imgs, err)
	}
}

// Masks saved as JPEG get a warning naming one of them whenever a data
// folder is read: their edges hold labels no class has, which data check
// would otherwise report as classes.
func TestJPEGMasksAreWarnedOf(t *testing.T) {
	dir := t.TempDir()
	data := synthData(t, dir, 1, 2)
	masks := filepath.Join(data, "masks", "val")
	for _, name := range []string{"val_00000", "val_00001"} {
		m, err := imageio.ReadImage(filepath.Join(masks, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(masks, name+".jpg"), b.Bytes())
		if err := os.Remove(filepath.Join(masks, name+".png")); err != nil {
			t.Fatal(err)
		}
	}
	stderr, _ := runCLIStderr(t, "data", "check", "--data", data, "--split", "val")
	if !strings.Contains(stderr, "warning: 2 masks are JPEG files ("+filepath.Join(masks, "val_00000.jpg")) {
		t.Errorf("stderr %q; want a warning of 2 JPEG masks", stderr)
	}
	stderr, _ = runCLIStderr(t, "data", "check", "--data", data, "--split", "train")
	if strings.Contains(stderr, "are JPEG files") {
		t.Errorf("PNG masks warned of: %q", stderr)
	}
}

// data check names the classes of an annotation format as its files name
// them, without --class-names.
func TestDataCheckNamesAnnotationClasses(t *testing.T) {
	dir := t.TempDir()
	var root string
	for _, l := range buildLayouts(t, dir, syntheticPairs(t, filepath.Join(dir, "src"), 2)) {
		if l.format == "labelme" {
			root = l.root
		}
	}
	stdout, err := runCLI(t, "data", "check", "--data", root, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var reports []data.Report
	if err := json.Unmarshal([]byte(stdout), &reports); err != nil || len(reports) == 0 {
		t.Fatalf("%q: %v", stdout, err)
	}
	var names []string
	for _, c := range reports[0].Classes {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"_background_", "red"}) {
		t.Errorf("class names %q, want the labels.txt's", names)
	}
}

// A data folder whose layout holds no pair is refused by check and
// convert (exit 1, naming the folder) rather than passed as all good.
func TestDataCheckRefusesEmptyData(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "empty")
	for _, d := range []string{"images", "masks"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"data", "check", "--data", root},
		{"data", "convert", "--data", root, "--out", filepath.Join(dir, "out")},
	} {
		_, err := runCLI(t, args...)
		code := 1 // as main exits for an error that says no status
		if ec := cli.ExitCoder(nil); errors.As(err, &ec) {
			code = ec.ExitCode()
		}
		if err == nil || code != 1 || !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "not one image/mask pair") {
			t.Errorf("%s: %v, want exit 1 naming %s", args[1], err, root)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out", "images")); err == nil {
		t.Error("convert wrote folders for no pairs")
	}
}
