package imageio

import (
	"image"
	"image/color"
	"path/filepath"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

// Tests on the real CamVid files from the shared assets; skipped when the
// folder is absent.

func camvidDir(t *testing.T) string {
	return testassets.Require(t, "data", "camvid")
}

func TestCamVidPairingAndMasks(t *testing.T) {
	dir := camvidDir(t)
	p, err := PairDataset(filepath.Join(dir, "images", "val"), filepath.Join(dir, "masks", "val"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	if len(p.Pairs) != 101 {
		t.Fatalf("%d val pairs, README says 101", len(p.Pairs))
	}
	person := mustParseMap(t, "9,10:1;11:255;*:0")
	totalPerson := 0
	for _, pair := range p.Pairs[:5] {
		img, err := ReadImage(pair.Image)
		if err != nil {
			t.Fatal(err)
		}
		if b := img.Bounds(); b.Dx() != 480 || b.Dy() != 360 {
			t.Fatalf("%s is %v, want 480x360", pair.Image, b)
		}
		raw, err := ReadMask(pair.Mask, MaskOptions{Width: 480, Height: 360, NumClasses: 12})
		if err != nil {
			t.Fatal(err)
		}
		var want [256]int
		for _, l := range raw.Labels {
			if l < 0 || l > 11 {
				t.Fatalf("%s: label %d outside 0..11", pair.Mask, l)
			}
			want[l]++
		}
		m, err := ReadMask(pair.Mask, MaskOptions{Map: person, NumClasses: 2, Ignore: 255})
		if err != nil {
			t.Fatal(err)
		}
		var got [256]int
		for _, l := range m.Labels {
			got[l]++
		}
		if got[1] != want[9]+want[10] || got[255] != want[11] || got[0] != 480*360-want[9]-want[10]-want[11] {
			t.Fatalf("%s: remapped counts person %d ignore %d bg %d from raw %v", pair.Mask, got[1], got[255], got[0], want[:12])
		}
		totalPerson += got[1]
	}
	// The map must produce the person class somewhere: scan on past the
	// first five masks until a person appears (CamVid's val split has
	// pedestrians), so that a map that never yields class 1 fails.
	for _, pair := range p.Pairs[5:] {
		if totalPerson > 0 {
			break
		}
		m, err := ReadMask(pair.Mask, MaskOptions{Map: person, NumClasses: 2, Ignore: 255})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range m.Labels {
			if l == 1 {
				totalPerson++
			}
		}
	}
	if totalPerson == 0 {
		t.Error("the person map produced no person pixel in any val mask")
	}
	// Masks of 12 classes do not fit 2 classes without the map.
	if _, err := ReadMask(p.Pairs[0].Mask, MaskOptions{NumClasses: 2, Ignore: 255}); err == nil {
		t.Error("12-class mask accepted as 2-class")
	}
}

func TestCamVidPreprocessAndOverlay(t *testing.T) {
	dir := camvidDir(t)
	imgs, err := ListImages(filepath.Join(dir, "images", "train"))
	if err != nil || len(imgs) != 367 {
		t.Fatalf("%d train images (README: 367), %v", len(imgs), err)
	}
	img, err := ReadImage(imgs[0])
	if err != nil {
		t.Fatal(err)
	}
	p := Preprocess{Resize: ResizeScale, ScaleFactor: 2, MultipleOf: 8, PlusOne: true, ValueScale: 1 / 127.5, ValueOffset: -1}
	data, g, err := p.NewTensor(img)
	if err != nil {
		t.Fatal(err)
	}
	if g.Width != 961 || g.Height != 721 {
		t.Fatalf("geometry %+v, want 961x721", g)
	}
	lo, hi := float32(2), float32(-2)
	for _, v := range data {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < -1 || hi > 1 || hi-lo < 1 {
		t.Fatalf("values span [%v, %v], want a real image inside [-1, 1]", lo, hi)
	}

	pal, err := ReadPalette(filepath.Join(dir, "camvid12_palette.png"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pal) < 12 || pal[0] != (color.RGBA{128, 128, 128, 255}) || pal[9] != (color.RGBA{64, 0, 128, 255}) {
		t.Fatalf("CamVid palette: %d colours, [0]=%v [9]=%v", len(pal), pal[0], pal[9])
	}
	maskPath := filepath.Join(dir, "masks", "train", filepath.Base(imgs[0]))
	m, err := ReadMask(maskPath, MaskOptions{Width: 480, Height: 360})
	if err != nil {
		t.Fatal(err)
	}
	labels, err := m.Uint8(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := WriteMaskPNG(filepath.Join(out, "mask.png"), labels, 480, 360, pal[:12]); err != nil {
		t.Fatal(err)
	}
	back, err := ReadMask(filepath.Join(out, "mask.png"), MaskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range back.Labels {
		if back.Labels[i] != m.Labels[i] {
			t.Fatalf("palette mask round trip differs at %d", i)
		}
	}
	if err := WriteOverlayPNG(filepath.Join(out, "overlay.png"), img, labels, pal, OverlayOptions{Alpha: 0.4}); err != nil {
		t.Fatal(err)
	}
	// A colour rendering of the mask maps back through the palette.
	colour := image.NewRGBA(image.Rect(0, 0, 480, 360))
	for i, l := range labels {
		colour.SetRGBA(i%480, i/480, pal[l])
	}
	cm, err := MaskFromImage(colour, "colour", MaskOptions{Palette: pal[:12]})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cm.Labels {
		if cm.Labels[i] != m.Labels[i] {
			t.Fatalf("colour mask differs at %d: %d vs %d", i, cm.Labels[i], m.Labels[i])
		}
	}
}

// BenchmarkCamVidDecodeAndPreprocess measures the real per-image cost: PNG
// decode plus preprocessing to 513×513 NCHW.
func BenchmarkCamVidDecodeAndPreprocess(b *testing.B) {
	path := filepath.Join(testassets.Require(b, "data", "camvid"), "images", "val")
	imgs, err := ListImages(path)
	if err != nil || len(imgs) == 0 {
		b.Fatal(err)
	}
	dst := make([]float32, 3*513*513)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		img, err := ReadImage(imgs[i%len(imgs)])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := deeplab513.Tensor(img, dst); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
