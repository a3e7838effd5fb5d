package datalayout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/internal/regfile"
)

// labelMe is a folder of LabelMe JSON files, one per image, as LabelMe
// saves them: beside their images or in a folder of their own, each
// naming its image by imagePath, relative to the JSON. The image must be
// inside the data folder or the folder above it (ann/ beside images/ is
// common), no further. The JSON files of a split are in SPLIT/ (train/,
// val/ …); without split folders, in the data folder itself.
// labelme2voc's labels.txt in the data folder (or the folder above it)
// orders the classes.
type labelMe struct{}

func (labelMe) Name() string { return "labelme" }

func (labelMe) Detect(root string) string {
	if isLabelMeDir(root) {
		return "LabelMe *.json"
	}
	for _, d := range subdirs(root) {
		if isSplitName(d) && isLabelMeDir(filepath.Join(root, d)) {
			return d + "/*.json from LabelMe"
		}
	}
	return ""
}

// sniffedLabelMeFiles is how many of a folder's JSON files detection
// reads: one other JSON sorted first (a config, a COCO file) must not hide
// a folder of LabelMe files, and a folder of other JSON is not read whole.
const sniffedLabelMeFiles = 8

// isLabelMeDir reports whether one of the first JSON files directly in dir
// is a LabelMe file (an object with "shapes" and "imagePath"), so that a
// folder of images with some other JSON beside them is not taken for
// one.
func isLabelMeDir(dir string) bool {
	files := labelMeFiles(dir)
	return slices.ContainsFunc(files[:min(len(files), sniffedLabelMeFiles)], isLabelMeFile)
}

func isLabelMeFile(path string) bool {
	f, _, err := regfile.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return annot.IsLabelMeJSON(f)
}

// labelMeFiles are the *.json files directly in dir, sorted.
func labelMeFiles(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.EqualFold(filepath.Ext(n), ".json") && !strings.HasPrefix(n, ".") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	return out
}

func (labelMe) Splits(root string) ([]string, error) {
	var out []string
	for _, d := range subdirs(root) {
		if isSplitName(d) && isLabelMeDir(filepath.Join(root, d)) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (labelMe) List(root string, opt Options) (*Set, error) {
	dir := filepath.Join(root, opt.Split)
	files := labelMeFiles(dir)
	if len(files) == 0 {
		return nil, fmt.Errorf("data set %s (labelme layout): no *.json files in %s", root, dir)
	}
	lopt := annot.LabelMeOptions{Root: filepath.Dir(root)}
	note := "classes: _background_, then the labels found, sorted (no labels.txt)"
	for _, p := range []string{filepath.Join(root, "labels.txt"), filepath.Join(filepath.Dir(root), "labels.txt")} {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		labels, err := annot.ReadLabelMeLabels(p)
		if err != nil {
			return nil, err
		}
		lopt.Labels, lopt.LabelsFile = labels, p
		note = "classes from " + p
		break
	}
	// Other JSON files beside the LabelMe ones are named, not read.
	var others []Unmatched
	files = slices.DeleteFunc(files, func(f string) bool {
		if isLabelMeFile(f) {
			return false
		}
		others = append(others, Unmatched{Path: f, Why: "a JSON file that is no LabelMe file (no shapes and imagePath)"})
		return true
	})
	as, err := annot.ReadLabelMe(files, lopt)
	if err != nil {
		return nil, err
	}
	set := &Set{Classes: as.Classes, Note: note, Unmatched: others}
	byImage := map[string]string{}
	for _, s := range as.Samples {
		img := filepath.Clean(s.Image)
		if other, dup := byImage[img]; dup {
			return nil, fmt.Errorf("data set %s (labelme layout): %s and %s both annotate %s", root, other, s.Ref, img)
		}
		byImage[img] = s.Ref
		if _, err := os.Stat(s.Image); err != nil {
			set.Unmatched = append(set.Unmatched, Unmatched{Path: s.Image, Why: fmt.Sprintf("named by %s (imagePath), but the image file is missing", filepath.Base(s.Ref))})
			continue
		}
		set.Samples = append(set.Samples, Sample{Image: s.Image, Mask: s.Ref, Name: nameBelow(dir, s.Image), Decode: renderMask(s, s.Ref)})
	}
	if images, err := imageio.ListImages(dir); err == nil {
		for _, f := range images {
			if _, named := byImage[filepath.Clean(f)]; !named {
				set.Unmatched = append(set.Unmatched, Unmatched{Path: f, Why: "image without a LabelMe file (no *.json names it by imagePath)"})
			}
		}
	}
	return set, nil
}
