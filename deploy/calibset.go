package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"io"
	"math"
	"path/filepath"
	"strings"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/internal/regfile"
)

// MinCalibrationImages is the fewest distinct, not near-constant images
// int8 ranges are calibrated on unless the caller lowers it: the ranges of
// one black frame passed their own check (0.98 agreement on that frame)
// and then disagreed with the float model on a quarter to two thirds of
// real pixels.
const MinCalibrationImages = 8

// NearConstantStd is the pixel standard deviation (in 0..255 levels, the
// largest of R, G and B) below which an image counts as near-constant: a
// blank frame's activations say nothing of a real image's ranges.
const NearConstantStd = 2.0

// ImageSet is what a set of images holds, by content.
type ImageSet struct {
	Images int
	// Digests maps each image's content digest (SHA-256 of its file) to
	// its first path.
	Digests map[string]string
	// Duplicates are images whose content an earlier one has, each with
	// that one ("b.png = a.png").
	Duplicates []string
	// NearConstant are the distinct images whose pixels barely vary.
	NearConstant []string
}

// ScreenImages reads each image once: its content digest and the spread of
// its pixels.
func ScreenImages(paths []string, dec imageio.Decoder) (*ImageSet, error) {
	s := &ImageSet{Images: len(paths), Digests: map[string]string{}}
	for _, p := range paths {
		img, digest, err := readDigested(dec, p)
		if err != nil {
			return nil, err
		}
		if first, ok := s.Digests[digest]; ok {
			s.Duplicates = append(s.Duplicates, filepath.Base(p)+" = "+filepath.Base(first))
			continue
		}
		s.Digests[digest] = p
		if pixelStd(img) < NearConstantStd {
			s.NearConstant = append(s.NearConstant, p)
		}
	}
	return s, nil
}

// Usable is the number of distinct images that are not near-constant.
func (s *ImageSet) Usable() int { return len(s.Digests) - len(s.NearConstant) }

// CheckCalibration refuses a calibration set with fewer than minImages usable
// images, saying what is wrong with the others.
func (s *ImageSet) CheckCalibration(minImages int) error {
	if s.Usable() >= minImages {
		return nil
	}
	var why []string
	if n := len(s.Duplicates); n > 0 {
		why = append(why, fmt.Sprintf("duplicates of earlier images: %d (%s)", n, listSome(s.Duplicates)))
	}
	if n := len(s.NearConstant); n > 0 {
		why = append(why, fmt.Sprintf("near-constant (blank) images: %d (%s)", n, listSome(baseNames(s.NearConstant))))
	}
	detail := ""
	if len(why) > 0 {
		detail = ": " + strings.Join(why, "; ")
	}
	return fmt.Errorf("only %d of the %d calibration images are distinct and not near-constant%s; ranges measured on so few misrepresent real images' activations: calibrate on at least %d varied images like those the model will segment",
		s.Usable(), s.Images, detail, minImages)
}

// NearConstantWarning is the warning for near-constant images in a set
// that has enough others ("" when there are none).
func (s *ImageSet) NearConstantWarning() string {
	if len(s.NearConstant) == 0 {
		return ""
	}
	return fmt.Sprintf("near-constant calibration images (blank frames?) add nothing to the ranges: %s", listSome(baseNames(s.NearConstant)))
}

// Overlap counts the paths whose content is one of the set's images.
func (s *ImageSet) Overlap(paths []string) (int, error) {
	n := 0
	for _, p := range paths {
		d, err := regfile.SHA256(p)
		if err != nil {
			return 0, fmt.Errorf("read image: %w", err)
		}
		if _, ok := s.Digests[d]; ok {
			n++
		}
	}
	return n, nil
}

// HoldOut splits the images of a calibration folder when no check images
// are given: those left out of the calibration sample of calibCount
// (0: all) are checked on; when the sample would take them all, every
// fourth image (at most checkCount, 0: no bound) is held out, provided
// minImages remain to calibrate on. heldOut is false when the check has to use
// the calibration images themselves.
func HoldOut(all []string, calibCount, checkCount, minImages int) (calib, check []string, heldOut bool) {
	calib = Sample(all, calibCount)
	if len(calib) < len(all) {
		in := map[string]bool{}
		for _, p := range calib {
			in[p] = true
		}
		var rest []string
		for _, p := range all {
			if !in[p] {
				rest = append(rest, p)
			}
		}
		return calib, Sample(rest, checkCount), true
	}
	k := len(all) / 4
	if checkCount > 0 {
		k = min(k, checkCount)
	}
	if k == 0 || len(all)-k < minImages {
		return calib, Sample(calib, checkCount), false
	}
	check = Sample(all, k)
	out := map[string]bool{}
	for _, p := range check {
		out[p] = true
	}
	calib = nil
	for _, p := range all {
		if !out[p] {
			calib = append(calib, p)
		}
	}
	return calib, check, true
}

func readDigested(dec imageio.Decoder, path string) (image.Image, string, error) {
	f, _, err := regfile.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("read image: %w", err)
	}
	defer f.Close()
	img, err := dec.Decode(f, path)
	if err != nil {
		return nil, "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, "", fmt.Errorf("read image %s: %w", path, err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, "", fmt.Errorf("read image %s: %w", path, err)
	}
	return img, hex.EncodeToString(h.Sum(nil)), nil
}

// pixelStd is the largest of the R, G and B standard deviations (0..255
// levels) over a grid of at most 64×64 pixels: enough to tell a blank
// frame, cheap for any image type.
func pixelStd(img image.Image) float64 {
	b := img.Bounds()
	nx, ny := min(b.Dx(), 64), min(b.Dy(), 64)
	if nx == 0 || ny == 0 {
		return 0
	}
	var sum, sq [3]float64
	for j := 0; j < ny; j++ {
		y := b.Min.Y + j*b.Dy()/ny
		for i := 0; i < nx; i++ {
			r, g, bl, _ := img.At(b.Min.X+i*b.Dx()/nx, y).RGBA()
			for c, v := range [3]uint32{r, g, bl} {
				f := float64(v >> 8)
				sum[c] += f
				sq[c] += f * f
			}
		}
	}
	n := float64(nx * ny)
	worst := 0.0
	for c := range sum {
		mean := sum[c] / n
		worst = math.Max(worst, math.Sqrt(math.Max(sq[c]/n-mean*mean, 0)))
	}
	return worst
}

// listSome lists up to four names, then how many more.
func listSome(names []string) string {
	if len(names) <= 4 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:4], ", "), len(names)-4)
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
