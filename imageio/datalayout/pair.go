package datalayout

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/segtune/segtune/imageio"
)

// pairRule says how the files of an image tree and a mask tree pair up.
type pairRule struct {
	// imageSuffixes are stripped from image names before matching
	// (Cityscapes' "_leftImg8bit").
	imageSuffixes []string
	// maskSuffixes: a mask named STEM+suffix pairs with the image STEM
	// when no mask is named STEM itself.
	maskSuffixes []string
	// masksNeedSuffix makes only files with a mask suffix masks; the
	// other images of the mask tree (Cityscapes' _gtFine_color.png,
	// _gtFine_instanceIds.png) are not part of the data set.
	masksNeedSuffix bool
}

// genericRule is the canonical folders': any mask suffix people use.
var genericRule = pairRule{
	imageSuffixes: []string{"_leftImg8bit"},
	maskSuffixes:  []string{"_gtFine_labelIds", "_labelIds", "_mask"},
}

// pairTrees pairs the images below imageDir with the masks below maskDir
// by their path relative to the folder, without extension and suffix
// (a/b.jpg with a/b.png or a/b_mask.png). When both are one folder, the
// files with a mask suffix are the masks and the others the images.
// Hidden files and folders are left out. Two images, or two masks, that
// would pair with the same name make the pairing ambiguous: an error
// naming both.
func pairTrees(imageDir, maskDir string, r pairRule) (*Set, error) {
	same := filepath.Clean(imageDir) == filepath.Clean(maskDir)
	imgFiles, err := walkImages(imageDir)
	if err != nil {
		return nil, err
	}
	maskFiles := imgFiles
	if !same {
		if maskFiles, err = walkImages(maskDir); err != nil {
			return nil, err
		}
	}
	// exact maps a name to the masks named so; suffixed to those named
	// with a mask suffix after it. An exact name wins.
	exact, suffixed := map[string][]string{}, map[string][]string{}
	isMask := map[string]bool{}
	for _, rel := range maskFiles {
		key := stripExt(rel)
		base, hasSuffix := trimAnySuffix(key, r.maskSuffixes)
		if (same || r.masksNeedSuffix) && !hasSuffix {
			continue
		}
		p := filepath.Join(maskDir, rel)
		isMask[p] = true
		if !r.masksNeedSuffix && !same {
			exact[key] = append(exact[key], p)
		}
		if hasSuffix {
			suffixed[base] = append(suffixed[base], p)
		}
	}
	set := &Set{}
	var folded map[string]string // by foldedIndex, for the first image without a mask
	images := map[string]string{}
	used := map[string]bool{}
	for _, rel := range imgFiles {
		p := filepath.Join(imageDir, rel)
		if isMask[p] {
			continue
		}
		key, _ := trimAnySuffix(stripExt(rel), r.imageSuffixes)
		if prev, dup := images[key]; dup {
			return nil, fmt.Errorf("data set: images %s and %s both have the name %q; pairing them with masks would be ambiguous", prev, p, key)
		}
		images[key] = p
		cands := exact[key]
		if len(cands) == 0 {
			cands = suffixed[key]
		}
		switch {
		case len(cands) == 0:
			why := fmt.Sprintf("image without a mask (no %s in %s)", wantMask(key, r), maskDir)
			if folded == nil {
				folded = foldedIndex(exact, suffixed)
			}
			if other := folded[strings.ToLower(key)]; other != "" {
				why += fmt.Sprintf("; %s differs from it only in case: names pair as they are spelled, on every system, so rename one", other)
			}
			set.Unmatched = append(set.Unmatched, Unmatched{Path: p, Why: why})
			continue
		case len(cands) > 1:
			return nil, fmt.Errorf("data set: image %s has several masks: %s; pairing would be ambiguous", p, strings.Join(cands, ", "))
		}
		m := cands[0]
		if used[m] {
			return nil, fmt.Errorf("data set: mask %s would pair with two images (one is %s)", m, p)
		}
		used[m] = true
		set.Samples = append(set.Samples, Sample{Image: p, Mask: m, Name: filepath.ToSlash(key)})
	}
	for p := range isMask {
		if !used[p] {
			set.Unmatched = append(set.Unmatched, Unmatched{Path: p, Why: "mask without an image in " + imageDir})
		}
	}
	return set, nil
}

// foldedIndex maps the lower-case names of indexes to a mask of that
// name, for saying that an image's mask differs from its name only in
// case. Names pair as spelled: a folder on Linux may hold a.png and
// A.png, and a data set pairs the same on every system; naming the mask
// tells the user why theirs (made where case is ignored) did not pair.
func foldedIndex(indexes ...map[string][]string) map[string]string {
	out := map[string]string{}
	for _, index := range indexes {
		for k, masks := range index {
			if _, ok := out[strings.ToLower(k)]; !ok {
				out[strings.ToLower(k)] = masks[0]
			}
		}
	}
	return out
}

func wantMask(key string, r pairRule) string {
	names := []string{}
	if !r.masksNeedSuffix {
		names = append(names, key+".png")
	}
	for _, s := range r.maskSuffixes {
		names = append(names, key+s+".png")
		if len(names) == 2 {
			break
		}
	}
	return strings.Join(names, " or ")
}

// walkImages returns the image files below dir as paths relative to it,
// sorted; hidden files and folders (atomic-write temporaries, .git) are
// left out. dir may be a link to a folder; links to folders below it are
// not followed (they could loop).
func walkImages(dir string) ([]string, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data set: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data set: %s is not a folder", dir)
	}
	top, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("data set: %w", err)
	}
	var out []string
	err = filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("data set: %w", err)
		}
		if p != top && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !imageio.IsImageFile(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(top, p)
		if err != nil {
			return err
		}
		out = append(out, rel)
		return nil
	})
	slices.Sort(out)
	return out, err
}

func stripExt(p string) string { return strings.TrimSuffix(p, filepath.Ext(p)) }

// trimAnySuffix removes the first of suffixes that name ends with.
func trimAnySuffix(name string, suffixes []string) (string, bool) {
	for _, s := range suffixes {
		if len(name) > len(s) && strings.HasSuffix(name, s) {
			return strings.TrimSuffix(name, s), true
		}
	}
	return name, false
}

// isDir reports whether the path is a folder (following links).
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// subdirs returns the names of the folders in dir, sorted.
func subdirs(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && isDir(filepath.Join(dir, e.Name())) {
			out = append(out, e.Name())
		}
	}
	return out
}
