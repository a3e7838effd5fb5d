package datalayout

import (
	"fmt"
	"image"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/imageio/annot"
	"github.com/segtune/segtune/internal/regfile"
)

// The annotation formats: labels in an annotation file or colour masks,
// rasterised per sample by imageio/annot when a mask is read.

// coco is a COCO data set: annotations/NAME_SPLIT.json (instances_ or
// stuff_ before the split, or the split alone) and the images of a split
// in SPLIT/, images/SPLIT/ or images/.
type coco struct{}

func (coco) Name() string { return "coco" }

func (c coco) Detect(root string) string {
	if files := cocoFiles(root); len(files) > 0 {
		return "annotations/*.json"
	}
	return ""
}

// cocoFiles maps each split to its annotation files.
func cocoFiles(root string) map[string][]string {
	entries, err := os.ReadDir(filepath.Join(root, "annotations"))
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			continue
		}
		split := strings.TrimSuffix(n, ".json")
		for _, p := range []string{"instances_", "stuff_"} {
			split = strings.TrimPrefix(split, p)
		}
		out[split] = append(out[split], filepath.Join(root, "annotations", n))
	}
	return out
}

func (coco) Splits(root string) ([]string, error) {
	files := cocoFiles(root)
	if len(files) == 0 {
		return nil, fmt.Errorf("data set %s (coco layout): no annotations/*.json", root)
	}
	return slices.Sorted(maps.Keys(files)), nil
}

func (coco) List(root string, opt Options) (*Set, error) {
	split := opt.Split
	files := cocoFiles(root)[split]
	switch len(files) {
	case 0:
		return nil, fmt.Errorf("data set %s (coco layout): no annotation file for split %s", root, split)
	case 1:
	default:
		return nil, fmt.Errorf("data set %s (coco layout): split %s has %d annotation files (%s): keep one, or use a folder with one", root, split, len(files), strings.Join(files, ", "))
	}
	dir := root
	for _, d := range []string{filepath.Join(root, split), filepath.Join(root, "images", split), filepath.Join(root, "images")} {
		if isDir(d) {
			dir = d
			break
		}
	}
	as, err := annot.ReadCOCO(files[0], annot.COCOOptions{ImageDir: dir, CrowdAsClass: opt.CrowdAsClass})
	if err != nil {
		return nil, err
	}
	return annotatedSet(as, files[0], dir), nil
}

// cvat is CVAT's "Segmentation mask 1.1" export: labelmap.txt, RGB colour
// masks in SegmentationClass/, the images (when exported) in JPEGImages/.
type cvat struct{}

func (cvat) Name() string { return "cvat" }

func (cvat) Detect(root string) string {
	if isCVAT(root) {
		return "labelmap.txt and SegmentationClass/"
	}
	return ""
}

func isCVAT(root string) bool {
	fi, err := os.Stat(filepath.Join(root, "labelmap.txt"))
	return err == nil && fi.Mode().IsRegular() && isDir(filepath.Join(root, "SegmentationClass"))
}

// Splits are the export's subsets, which CVAT lists in
// ImageSets/Segmentation/SUBSET.txt, where there are more than its
// "default" one: a task exported with train and val subsets is split as
// they say; one with only its default subset (every export has it) is one
// set, as before.
func (cvat) Splits(root string) ([]string, error) {
	lists, _ := filepath.Glob(filepath.Join(root, "ImageSets", "Segmentation", "*.txt"))
	var subsets []string
	for _, l := range lists {
		if n := strings.TrimSuffix(filepath.Base(l), ".txt"); !strings.HasPrefix(n, ".") {
			subsets = append(subsets, n)
		}
	}
	if len(subsets) == 1 && subsets[0] == "default" {
		return nil, nil
	}
	return subsets, nil
}

func (cvat) List(root string, opt Options) (*Set, error) {
	as, err := annot.ReadCVAT(root, annot.CVATOptions{})
	if err != nil {
		return nil, err
	}
	set := annotatedSet(as, filepath.Join(root, "labelmap.txt"), filepath.Join(root, "JPEGImages"))
	if opt.Split == "" {
		return set, nil
	}
	return subsetOf(set, filepath.Join(root, "ImageSets", "Segmentation", opt.Split+".txt"))
}

// subsetOf keeps the samples of set that the split list names (one id, an
// image's name without extension, a line); an id without a sample is
// unmatched, and so is a sample of another split no longer.
func subsetOf(set *Set, list string) (*Set, error) {
	text, err := regfile.ReadSmall(list, maxListBytes)
	if err != nil {
		return nil, fmt.Errorf("data set: split list: %w", err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	out := &Set{Classes: set.Classes}
	for _, s := range set.Samples {
		if listed[s.Name] {
			out.Samples = append(out.Samples, s)
			delete(listed, s.Name)
		}
	}
	for _, u := range set.Unmatched {
		if id := stripExt(filepath.Base(u.Path)); listed[id] {
			out.Unmatched = append(out.Unmatched, u)
			delete(listed, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		out.Unmatched = append(out.Unmatched, Unmatched{Path: list, Why: fmt.Sprintf("lists %s, which has no annotated image", id)})
	}
	return out, nil
}

// cvatXML is CVAT's "CVAT for images 1.1" export: annotations.xml, with
// the images (when exported) in images/, named as the XML names them.
type cvatXML struct{}

func (cvatXML) Name() string { return "cvat-xml" }

func (cvatXML) Detect(root string) string {
	if isCVATXML(filepath.Join(root, "annotations.xml")) {
		return "annotations.xml from CVAT"
	}
	return ""
}

// sniffedXMLBytes is how much of an annotations.xml detection reads: its
// root element starts within CVAT's first line or two.
const sniffedXMLBytes = 64 << 10

func isCVATXML(path string) bool {
	f, _, err := regfile.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return annot.IsCVATXML(io.LimitReader(f, sniffedXMLBytes))
}

// Splits are the subsets of a project export, which names each image's
// (and keeps its images in images/SUBSET/), where there are more than
// CVAT's "default" one; a task export has none.
func (cvatXML) Splits(root string) ([]string, error) {
	subsets, err := annot.CVATXMLSubsets(filepath.Join(root, "annotations.xml"))
	if err != nil || (len(subsets) == 1 && subsets[0] == "default") {
		return nil, err
	}
	return subsets, nil
}

func (cvatXML) List(root string, opt Options) (*Set, error) {
	file := filepath.Join(root, "annotations.xml")
	dir := root
	if d := filepath.Join(root, "images"); isDir(d) {
		dir = d
	}
	as, err := annot.ReadCVATXML(file, annot.CVATXMLOptions{ImageDir: dir, Subset: opt.Split})
	if err != nil {
		return nil, err
	}
	if opt.Split != "" {
		dir = filepath.Join(dir, opt.Split)
	}
	return annotatedSet(as, file, dir), nil
}

// labelStudio is a Label Studio JSON export with brush labels
// (project-N-at-DATE-HASH.json, as Label Studio names it) beside the
// tasks' images (in images/, or the same folder).
type labelStudio struct{}

func (labelStudio) Name() string { return "labelstudio" }

func (labelStudio) Detect(root string) string {
	if f, _ := labelStudioFile(root); f != "" {
		return filepath.Base(f)
	}
	return ""
}

// labelStudioFile is root's Label Studio export, "" when it has none;
// more than one is an error.
func labelStudioFile(root string) (string, error) {
	files, _ := filepath.Glob(filepath.Join(root, "project-*-at-*.json"))
	switch len(files) {
	case 0:
		return "", nil
	case 1:
		return files[0], nil
	}
	return files[0], fmt.Errorf("data set %s (labelstudio layout): %d exports (%s): keep one", root, len(files), strings.Join(files, ", "))
}

func (labelStudio) Splits(string) ([]string, error) { return nil, nil }

func (labelStudio) List(root string, _ Options) (*Set, error) {
	file, err := labelStudioFile(root)
	if err != nil {
		return nil, err
	}
	dir := root
	if d := filepath.Join(root, "images"); isDir(d) {
		dir = d
	}
	as, err := annot.ReadLabelStudio(file, annot.LabelStudioOptions{ImageDir: dir})
	if err != nil {
		return nil, err
	}
	set := annotatedSet(as, file, dir)
	for _, u := range as.Unlabelled {
		set.Unmatched = append(set.Unmatched, Unmatched{Path: u, Why: "a task of " + filepath.Base(file) + " without a brush annotation"})
	}
	return set, nil
}

// annotatedSet turns a decoder's set into samples whose masks it renders,
// with the images of imageDir that no annotation names, and annotations
// whose image is missing, as unmatched.
func annotatedSet(as *annot.Set, source, imageDir string) *Set {
	set := &Set{Classes: as.Classes}
	named := map[string]bool{}
	for _, s := range as.Samples {
		if s.Image == "" {
			set.Unmatched = append(set.Unmatched, Unmatched{Path: source, Why: fmt.Sprintf("annotates %s, whose image is not in the export", s.Ref)})
			continue
		}
		named[filepath.Clean(s.Image)] = true
		if _, err := os.Stat(s.Image); err != nil {
			set.Unmatched = append(set.Unmatched, Unmatched{Path: s.Image, Why: fmt.Sprintf("annotated in %s, but the image file is missing", filepath.Base(source))})
			continue
		}
		set.Samples = append(set.Samples, Sample{Image: s.Image, Mask: source, Name: nameBelow(imageDir, s.Image), Decode: renderMask(s, source+" ("+s.Ref+")")})
	}
	if files, err := imageio.ListImages(imageDir); err == nil {
		for _, f := range files {
			if !named[filepath.Clean(f)] {
				set.Unmatched = append(set.Unmatched, Unmatched{Path: f, Why: "image without an annotation in " + filepath.Base(source)})
			}
		}
	}
	return set
}

// nameBelow is a sample's Name: its image's path below dir without
// extension ("a/x" for dir/a/x.jpg), or its base name for an image
// elsewhere, so that images of one base name in two sub-folders (COCO's
// file_name "a/x.jpg" and "b/x.jpg") stay two samples.
func nameBelow(dir, image string) string {
	if rel, err := filepath.Rel(dir, image); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(stripExt(rel))
	}
	return stripExt(filepath.Base(image))
}

// renderMask reads an annotated sample's labels as a mask image would be
// read: through imageio.MaskFromImage, so that opt's size check, label
// map and class range apply; name is the mask's name in errors.
func renderMask(s annot.Sample, name string) func(imageio.MaskOptions) (*imageio.Mask, error) {
	return func(opt imageio.MaskOptions) (*imageio.Mask, error) {
		labels, err := s.Mask()
		if err != nil {
			return nil, err
		}
		img := &image.Gray{Pix: labels, Stride: s.Width, Rect: image.Rect(0, 0, s.Width, s.Height)}
		return imageio.MaskFromImage(img, name, opt)
	}
}
