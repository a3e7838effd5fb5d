package datalayout

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
	"github.com/segtune/segtune/internal/setting"
)

// Folder names of the canonical layout, in order of preference.
var (
	imageFolderNames = []string{"images", "imgs", "img", "img_dir", "JPEGImages"}
	maskFolderNames  = []string{"masks", "annotations", "labels", "ann_dir", "SegmentationClass"}
)

// cityscapes is leftImg8bit/SPLIT/CITY/NAME_leftImg8bit.png with
// gtFine/SPLIT/CITY/NAME_gtFine_labelIds.png; gtFine's other files
// (colour, instance ids, polygons) are not masks.
type cityscapes struct{}

func (cityscapes) Name() string { return "cityscapes" }

func (cityscapes) Detect(root string) string {
	if isDir(filepath.Join(root, "leftImg8bit")) && isDir(filepath.Join(root, "gtFine")) {
		return "leftImg8bit/ and gtFine/"
	}
	return ""
}

func (cityscapes) Splits(root string) ([]string, error) {
	return commonSubdirs(filepath.Join(root, "leftImg8bit"), filepath.Join(root, "gtFine")), nil
}

func (cityscapes) List(root string, opt Options) (*Set, error) {
	split := opt.Split
	set, err := pairTrees(filepath.Join(root, "leftImg8bit", split), filepath.Join(root, "gtFine", split), pairRule{
		imageSuffixes: []string{"_leftImg8bit"}, maskSuffixes: []string{"_gtFine_labelIds"}, masksNeedSuffix: true,
	})
	if err != nil {
		return nil, err
	}
	set.LabelPreset = "cityscapes"
	return set, nil
}

// voc is Pascal VOC: JPEGImages/ID.jpg with the palette PNG
// SegmentationClass/ID.png, the splits listed in
// ImageSets/Segmentation/SPLIT.txt. JPEGImages also holds the images of
// the detection task, which have no masks: only the listed ids count.
type voc struct{}

func (voc) Name() string { return "voc" }

func (voc) Detect(root string) string {
	// CVAT's export has VOC's folders, with colour masks and labelmap.txt.
	if isDir(filepath.Join(root, "JPEGImages")) && isDir(filepath.Join(root, "SegmentationClass")) && !isCVAT(root) {
		return "JPEGImages/ and SegmentationClass/"
	}
	return ""
}

// FixNoSplitLists is the advice on a VOC data set without split lists,
// naming the setting by {key} (setting.Messagef).
const FixNoSplitLists = "{format} folders pairs JPEGImages/ with SegmentationClass/ by name"

func (voc) Splits(root string) ([]string, error) {
	dir := filepath.Join(root, "ImageSets", "Segmentation")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, setting.Messagef("data set %s (voc layout): the split lists: %w; "+FixNoSplitLists, root, err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".txt") && !strings.HasPrefix(n, ".") {
			out = append(out, strings.TrimSuffix(n, ".txt"))
		}
	}
	if len(out) == 0 {
		return nil, setting.Messagef("data set %s (voc layout): no split lists (*.txt) in %s; "+FixNoSplitLists, root, dir)
	}
	return out, nil
}

// maxListBytes bounds a VOC split list (VOC 2012's trainval.txt is 33 KB).
const maxListBytes = 64 << 20

func (voc) List(root string, opt Options) (*Set, error) {
	split := opt.Split
	list := filepath.Join(root, "ImageSets", "Segmentation", split+".txt")
	text, err := regfile.ReadSmall(list, maxListBytes)
	if err != nil {
		return nil, fmt.Errorf("data set: split list: %w", err)
	}
	images, err := stemIndex(filepath.Join(root, "JPEGImages"))
	if err != nil {
		return nil, err
	}
	masks, err := stemIndex(filepath.Join(root, "SegmentationClass"))
	if err != nil {
		return nil, err
	}
	set := &Set{LabelPreset: "voc"}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || seen[fields[0]] {
			continue
		}
		id := fields[0]
		seen[id] = true
		img, mask := images[id], masks[id]
		switch {
		case img == "" && mask == "":
			set.Unmatched = append(set.Unmatched, Unmatched{Path: list, Why: fmt.Sprintf("lists %s, which has neither an image in JPEGImages/ nor a mask in SegmentationClass/", id)})
		case img == "":
			set.Unmatched = append(set.Unmatched, Unmatched{Path: mask, Why: fmt.Sprintf("mask without an image (%s lists %s; no JPEGImages/%s.jpg)", filepath.Base(list), id, id)})
		case mask == "":
			set.Unmatched = append(set.Unmatched, Unmatched{Path: img, Why: fmt.Sprintf("image without a mask (%s lists %s; no SegmentationClass/%s.png)", filepath.Base(list), id, id)})
		default:
			set.Samples = append(set.Samples, Sample{Image: img, Mask: mask, Name: id})
		}
	}
	return set, nil
}

// stemIndex maps base names without extension to the images in dir.
func stemIndex(dir string) (map[string]string, error) {
	files, err := imageio.ListImages(dir)
	if err != nil {
		return nil, fmt.Errorf("data set: %w", err)
	}
	m := make(map[string]string, len(files))
	for _, f := range files {
		stem := stripExt(filepath.Base(f))
		if prev, dup := m[stem]; dup {
			return nil, fmt.Errorf("data set: %s and %s share the name %q; pairing would be ambiguous", prev, f, stem)
		}
		m[stem] = f
	}
	return m, nil
}

// ade20k is ADEChallengeData2016 as mmseg reads it: images/{training,
// validation} with annotations/{training,validation}, labels 1..150 and
// 0 for "other" (the ade20k label preset makes 0 the ignore label).
type ade20k struct{}

func (ade20k) Name() string { return "ade20k" }

func (ade20k) Detect(root string) string {
	for _, s := range []string{"training", "validation"} {
		if isDir(filepath.Join(root, "images", s)) && isDir(filepath.Join(root, "annotations", s)) {
			return "images/" + s + "/ and annotations/" + s + "/"
		}
	}
	return ""
}

func (ade20k) Splits(root string) ([]string, error) {
	return commonSubdirs(filepath.Join(root, "images"), filepath.Join(root, "annotations")), nil
}

func (ade20k) List(root string, opt Options) (*Set, error) {
	split := opt.Split
	set, err := pairTrees(filepath.Join(root, "images", split), filepath.Join(root, "annotations", split), genericRule)
	if err != nil {
		return nil, err
	}
	set.LabelPreset = "ade20k"
	return set, nil
}

// folders is the canonical layout: an image folder and a mask folder
// (see imageFolderNames and maskFolderNames), either per split
// (images/train with masks/train, or train/images with train/masks) or
// holding the whole set; or images and suffixed masks side by side
// (a.jpg with a_mask.png). Sub-folders below a split are nested data.
type folders struct{}

func (folders) Name() string { return "folders" }

// foldersShape is where a canonical layout keeps its files.
type foldersShape struct {
	img, mask  string   // folder names, kind first (images/SPLIT)
	splitFirst []string // splits with SPLIT/img and SPLIT/mask
	sideBySide bool     // images and suffixed masks in root itself
}

func (folders) shape(root string) (foldersShape, error) {
	imgs, masks := present(root, imageFolderNames), present(root, maskFolderNames)
	if len(imgs) > 1 || len(masks) > 1 {
		return foldersShape{}, &AmbiguousError{Root: root, Found: append(slashed(imgs), slashed(masks)...)}
	}
	if len(imgs) == 1 && len(masks) == 1 {
		return foldersShape{img: imgs[0], mask: masks[0]}, nil
	}
	var s foldersShape
	for _, split := range subdirs(root) {
		if !isSplitName(split) {
			continue
		}
		im, ma := present(filepath.Join(root, split), imageFolderNames), present(filepath.Join(root, split), maskFolderNames)
		if len(im) > 1 || len(ma) > 1 {
			return foldersShape{}, &AmbiguousError{Root: filepath.Join(root, split), Found: append(slashed(im), slashed(ma)...)}
		}
		if len(im) == 1 && len(ma) == 1 {
			if s.img != "" && (s.img != im[0] || s.mask != ma[0]) {
				return foldersShape{}, fmt.Errorf("data set %s: its splits name their folders differently (%s/%s and %s/%s)", root, s.img, s.mask, im[0], ma[0])
			}
			s.img, s.mask = im[0], ma[0]
			s.splitFirst = append(s.splitFirst, split)
		}
	}
	if len(s.splitFirst) > 0 {
		return s, nil
	}
	if files, _ := imageio.ListImages(root); slices.ContainsFunc(files, func(f string) bool {
		_, ok := trimAnySuffix(stripExt(filepath.Base(f)), genericRule.maskSuffixes)
		return ok
	}) {
		return foldersShape{sideBySide: true}, nil
	}
	return foldersShape{}, fmt.Errorf("data set %s: %w: want images/ with masks/ (or annotations/, labels/), per split or not, or %s",
		root, ErrUnknownLayout, strings.Join(Formats()[:len(Formats())-1], ", "))
}

func (f folders) Detect(root string) string {
	s, err := f.shape(root)
	switch {
	case err != nil:
		return ""
	case s.sideBySide:
		return "images with _mask files beside them"
	case len(s.splitFirst) > 0:
		return fmt.Sprintf("%s/%s/ and %s/%s/", s.splitFirst[0], s.img, s.splitFirst[0], s.mask)
	}
	return s.img + "/ and " + s.mask + "/"
}

func (f folders) Splits(root string) ([]string, error) {
	s, err := f.shape(root)
	if err != nil {
		return nil, err
	}
	if s.splitFirst != nil {
		return s.splitFirst, nil
	}
	if s.sideBySide {
		return nil, nil
	}
	var out []string
	for _, d := range commonSubdirs(filepath.Join(root, s.img), filepath.Join(root, s.mask)) {
		if isSplitName(d) {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f folders) List(root string, opt Options) (*Set, error) {
	split := opt.Split
	s, err := f.shape(root)
	if err != nil {
		return nil, err
	}
	switch {
	case s.sideBySide:
		return pairTrees(root, root, genericRule)
	case s.splitFirst != nil:
		return pairTrees(filepath.Join(root, split, s.img), filepath.Join(root, split, s.mask), genericRule)
	}
	return pairTrees(filepath.Join(root, s.img, split), filepath.Join(root, s.mask, split), genericRule)
}

// present returns those of names that are folders in dir.
// present returns the folders of dir that names name, as they are
// named, in the order of names. Case is ignored where no folder has one
// of names exactly: a data set made on macOS or Windows, whose file
// systems ignore it, often has Images/ and Masks/, and is found as it is
// there. A folder named exactly wins over other names in another case
// (VOC's Annotations/ of XML files beside SegmentationClass/), but not
// over its own name in another case (images/ and Images/: both are
// returned, an ambiguity the caller refuses).
func present(dir string, names []string) []string {
	var exact, folded []string
	foldedOf := map[string]string{}
	subs := subdirs(dir)
	for _, n := range names {
		for _, d := range subs {
			switch {
			case d == n:
				exact = append(exact, d)
			case strings.EqualFold(d, n):
				folded = append(folded, d)
				foldedOf[d] = n
			}
		}
	}
	if len(exact) == 0 {
		return folded
	}
	for _, d := range folded {
		if slices.Contains(exact, foldedOf[d]) {
			exact = append(exact, d)
		}
	}
	return exact
}

func slashed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + "/"
	}
	return out
}

// commonSubdirs returns the folders that are in both a and b.
func commonSubdirs(a, b string) []string {
	var out []string
	for _, d := range subdirs(a) {
		if isDir(filepath.Join(b, d)) {
			out = append(out, d)
		}
	}
	return out
}

// isSplitName reports whether name is one of the usual split names.
func isSplitName(name string) bool {
	for _, group := range splitAliases {
		if slices.ContainsFunc(group, func(s string) bool { return strings.EqualFold(s, name) }) {
			return true
		}
	}
	return false
}
