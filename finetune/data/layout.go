package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Folder names recognised by ResolveSplit, in order of preference.
var (
	imageFolderNames = []string{"images", "imgs", "img", "img_dir", "JPEGImages"}
	maskFolderNames  = []string{"masks", "annotations", "labels", "ann_dir", "SegmentationClass"}
	splitAliases     = map[string][]string{
		"train": {"train", "training"},
		"val":   {"val", "validation", "valid"},
		"test":  {"test", "testing"},
	}
)

// ResolveSplit finds the image and mask folders of split (e.g. "train",
// "val") under root. It accepts root/<images>/<split> with
// root/<masks>/<split> (mmseg, ADE20K), and root/<split>/<images> with
// root/<split>/<masks>, where <images> is images, imgs, img, img_dir or
// JPEGImages, <masks> is masks, annotations, labels, ann_dir or
// SegmentationClass, and train/val/test also match training, validation
// (or valid) and testing.
func ResolveSplit(root, split string) (imageDir, maskDir string, err error) {
	if fi, err := os.Stat(root); err != nil {
		return "", "", fmt.Errorf("data set root: %w", err)
	} else if !fi.IsDir() {
		return "", "", fmt.Errorf("data set root %s is not a folder", root)
	}
	names := splitNames(split)
	for _, s := range names {
		imageDir = firstDir(root, imageFolderNames, s, true)
		maskDir = firstDir(root, maskFolderNames, s, true)
		if imageDir != "" && maskDir != "" {
			return imageDir, maskDir, nil
		}
		imageDir = firstDir(root, imageFolderNames, s, false)
		maskDir = firstDir(root, maskFolderNames, s, false)
		if imageDir != "" && maskDir != "" {
			return imageDir, maskDir, nil
		}
	}
	return "", "", fmt.Errorf("data set %s: no image and mask folders for split %q; want e.g. %s and %s (or %s/images and %s/masks)",
		root, split, filepath.Join(root, "images", names[0]), filepath.Join(root, "masks", names[0]),
		filepath.Join(root, names[0]), filepath.Join(root, names[0]))
}

// splitNames returns split followed by its aliases.
func splitNames(split string) []string {
	out := []string{split}
	for _, group := range splitAliases {
		for _, alias := range group {
			if strings.EqualFold(alias, split) {
				for _, a := range group {
					if a != split {
						out = append(out, a)
					}
				}
				return out
			}
		}
	}
	return out
}

// firstDir returns the first existing root/<kind>/<split> (kindFirst) or
// root/<split>/<kind> folder, or "".
func firstDir(root string, kinds []string, split string, kindFirst bool) string {
	for _, k := range kinds {
		p := filepath.Join(root, split, k)
		if kindFirst {
			p = filepath.Join(root, k, split)
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p
		}
	}
	return ""
}
