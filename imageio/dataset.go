package imageio

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ImageExtensions are the file extensions (lower case) treated as images
// when listing folders.
var ImageExtensions = []string{".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp"}

// IsImageFile reports whether name has one of ImageExtensions (any case).
func IsImageFile(name string) bool {
	return slices.Contains(ImageExtensions, strings.ToLower(filepath.Ext(name)))
}

// ListImages returns the paths of the image files directly in dir, sorted
// by name. Sub-folders and hidden files (such as atomic-write temporaries)
// are skipped.
func ListImages(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !IsImageFile(name) {
			continue
		}
		out = append(out, filepath.Join(dir, name))
	}
	return out, nil
}

// Pair is an image and its mask.
type Pair struct {
	Image, Mask string
}

// Pairing is the result of matching an image folder with a mask folder.
type Pairing struct {
	Pairs []Pair // sorted by image name
	// ImagesWithoutMask and MasksWithoutImage list the unmatched paths.
	ImagesWithoutMask []string
	MasksWithoutImage []string
}

// PairDataset matches the images in imageDir with the masks in maskDir by
// base name without extension (a.jpg pairs with a.png). Two files with the
// same base name in one folder are an error, as the pairing would be
// ambiguous; unmatched files are reported in the result (see Pairing.Err).
func PairDataset(imageDir, maskDir string) (*Pairing, error) {
	images, err := stems(imageDir)
	if err != nil {
		return nil, err
	}
	masks, err := stems(maskDir)
	if err != nil {
		return nil, err
	}
	p := &Pairing{}
	for _, stem := range sortedKeys(images) {
		img := images[stem]
		if m, ok := masks[stem]; ok {
			p.Pairs = append(p.Pairs, Pair{Image: img, Mask: m})
		} else {
			p.ImagesWithoutMask = append(p.ImagesWithoutMask, img)
		}
	}
	for _, stem := range sortedKeys(masks) {
		if _, ok := images[stem]; !ok {
			p.MasksWithoutImage = append(p.MasksWithoutImage, masks[stem])
		}
	}
	return p, nil
}

// Err returns an error describing unmatched files (up to five of each kind
// by name), or nil when every image has a mask and every mask an image.
func (p *Pairing) Err() error {
	if len(p.ImagesWithoutMask) == 0 && len(p.MasksWithoutImage) == 0 {
		return nil
	}
	var parts []string
	if n := len(p.ImagesWithoutMask); n > 0 {
		parts = append(parts, fmt.Sprintf("%d image(s) without a mask: %s", n, listSome(p.ImagesWithoutMask)))
	}
	if n := len(p.MasksWithoutImage); n > 0 {
		parts = append(parts, fmt.Sprintf("%d mask(s) without an image: %s", n, listSome(p.MasksWithoutImage)))
	}
	if img, mask := caseOnlyPair(p.ImagesWithoutMask, p.MasksWithoutImage); img != "" {
		parts = append(parts, fmt.Sprintf("%s and %s differ only in case: names pair as they are spelled, on every system, so rename one", img, mask))
	}
	return fmt.Errorf("data set pairing: %s", strings.Join(parts, "; "))
}

// caseOnlyPair returns an unmatched image and mask whose names, without
// extension, differ only in case (as datalayout names them), or "".
func caseOnlyPair(images, masks []string) (string, string) {
	stem := func(p string) string { return strings.ToLower(strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))) }
	byStem := make(map[string]string, len(masks))
	for _, m := range masks {
		byStem[stem(m)] = m
	}
	for _, img := range images {
		if m, ok := byStem[stem(img)]; ok {
			return img, m
		}
	}
	return "", ""
}

func listSome(paths []string) string {
	const shown = 5
	s := strings.Join(paths[:min(len(paths), shown)], ", ")
	if len(paths) > shown {
		s += fmt.Sprintf(", and %d more", len(paths)-shown)
	}
	return s
}

// stems maps base names without extension to the image files in dir.
func stems(dir string) (map[string]string, error) {
	files, err := ListImages(dir)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(files))
	for _, f := range files {
		base := filepath.Base(f)
		stem := strings.TrimSuffix(base, filepath.Ext(base))
		if prev, dup := m[stem]; dup {
			return nil, fmt.Errorf("data set: %s and %s share the name %q; pairing would be ambiguous", prev, f, stem)
		}
		m[stem] = f
	}
	return m, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
