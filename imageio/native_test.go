package imageio

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio/internal/nativecodec"
	"github.com/segtune/segtune/internal/testassets"
)

// requireNative fails (under $SEGTUNE_REQUIRE_ASSETS) or skips the test
// unless libjpeg-turbo loads (scripts/install-codecs.sh).
func requireNative(t *testing.T) {
	t.Helper()
	if nativeOff {
		t.Skipf("native codecs turned off by %s", NativeCodecsEnvVar)
	}
	if l := nativecodec.JPEGLibrary(); l.Err != nil {
		testassets.SkipOrFail(t, "%v (scripts/install-codecs.sh)", l.Err)
	}
}

// goDecode decodes with Go's decoders alone.
func goDecode(t *testing.T, data []byte) image.Image {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func nativeDecode(t *testing.T, data []byte, name string) image.Image {
	t.Helper()
	img, err := DecodeImage(bytes.NewReader(data), name)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func toRGBA(img image.Image) *image.RGBA {
	if m, ok := img.(*image.RGBA); ok {
		return m
	}
	m := image.NewRGBA(img.Bounds())
	draw.Draw(m, m.Rect, img, img.Bounds().Min, draw.Src)
	return m
}

func typeName(img image.Image) string { return strings.TrimPrefix(fmt.Sprintf("%T", img), "*image.") }

// pngChunk builds a chunk with its CRC.
func pngChunk(typ string, data []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	b = append(append(b, typ...), data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
}

// jpegTolerance bounds the difference of an 8-bit channel between
// libjpeg-turbo's RGBA and Go's image/jpeg converted to RGBA: the two
// IDCTs and YCbCr conversions round differently (at most 4 measured, on
// the 24 CamVid images at qualities 75, 90 and 100).
const jpegTolerance = 5

func maxDiff(a, b *image.RGBA) int {
	d := 0
	for i := range a.Pix {
		d = max(d, int(a.Pix[i])-int(b.Pix[i]), int(b.Pix[i])-int(a.Pix[i]))
	}
	return d
}

func TestNativeJPEGCloseToGo(t *testing.T) {
	requireNative(t)
	imgs := map[string]image.Image{"smooth": smoothRGBA(97, 61), "gray": grayOf(smoothRGBA(40, 33))}
	if dir := testassets.SharedAssetsDir(); dir != "" {
		paths, _ := ListImages(filepath.Join(dir, "data", "camvid", "images", "val"))
		for _, p := range paths[:min(len(paths), 24)] {
			img, err := ReadImage(p)
			if err != nil {
				t.Fatal(err)
			}
			imgs[filepath.Base(p)] = img
		}
	}
	worst := 0
	for name, src := range imgs {
		for _, q := range []int{75, 90, 100} {
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: q}); err != nil {
				t.Fatal(err)
			}
			got := nativeDecode(t, buf.Bytes(), name)
			if _, ok := got.(*image.RGBA); !ok {
				t.Fatalf("%s: native JPEG decode gives %T", name, got)
			}
			d := maxDiff(got.(*image.RGBA), toRGBA(goDecode(t, buf.Bytes())))
			if d > jpegTolerance {
				t.Fatalf("%s q%d: libjpeg-turbo differs from image/jpeg by %d > %d", name, q, d, jpegTolerance)
			}
			worst = max(worst, d)
		}
	}
	t.Logf("largest channel difference libjpeg-turbo vs image/jpeg: %d", worst)
}

func smoothRGBA(w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetRGBA(x, y, color.RGBA{uint8(3 * x), uint8(4 * y), uint8(x + y), 255})
		}
	}
	return img
}

func grayOf(img image.Image) *image.Gray {
	g := image.NewGray(img.Bounds())
	draw.Draw(g, g.Rect, img, image.Point{}, draw.Src)
	return g
}

// Without libjpeg-turbo (or with it turned off) images are decoded by Go
// as before, with no error, and DecoderInfo says so; PNG is Go's always.
func TestNativeMissingFallsBack(t *testing.T) {
	jn := nativecodec.JPEGNames
	nativecodec.ResetForTest([]string{"libsegtune-no-such-turbojpeg.so.0"})
	defer nativecodec.ResetForTest(jn)
	if nativecodec.JPEGLibrary().Err == nil {
		t.Fatal("a library that does not exist loaded")
	}
	if info := DecoderInfo(); !strings.Contains(info, "JPEG Go's image/jpeg") || !strings.Contains(info, "PNG Go's image/png") ||
		!strings.Contains(info, "install-codecs.sh") {
		t.Fatalf("DecoderInfo without the libraries: %q", info)
	}
	checkGoDecoders(t)
	nativecodec.ResetForTest(jn)
	if l := nativecodec.JPEGLibrary(); l.Err == nil {
		if info := DecoderInfo(); !strings.Contains(info, "JPEG libjpeg-turbo") || !strings.Contains(info, "PNG Go's image/png") {
			t.Fatalf("DecoderInfo with libjpeg-turbo: %q", info)
		}
		checkGoPNG(t)
	}
	old := nativeOff
	nativeOff = true
	defer func() { nativeOff = old }()
	if info := DecoderInfo(); !strings.Contains(info, NativeCodecsEnvVar) {
		t.Fatalf("DecoderInfo turned off: %q", info)
	}
	checkGoDecoders(t)
}

func checkGoDecoders(t *testing.T) {
	t.Helper()
	src := smoothRGBA(30, 20)
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, src, nil); err != nil {
		t.Fatal(err)
	}
	if img := nativeDecode(t, jb.Bytes(), "x.jpg"); typeName(img) != "YCbCr" {
		t.Fatalf("JPEG decoded as %s, want Go's YCbCr", typeName(img))
	}
	checkGoPNG(t)
}

// checkGoPNG: a PNG comes out of DecodeImage as image/png's image.
func checkGoPNG(t *testing.T) {
	t.Helper()
	src := smoothRGBA(30, 20)
	if img := nativeDecode(t, encodePNG(t, src), "x.png"); typeName(img) != "RGBA" || !bytes.Equal(img.(*image.RGBA).Pix, src.Pix) {
		t.Fatalf("PNG decoded as %s", typeName(img))
	}
}

// Damaged files: an error that names the file, never a panic, never a
// half-grey image (libjpeg-turbo only warns about a truncated JPEG).
func TestNativeHostile(t *testing.T) {
	requireNative(t)
	dir := t.TempDir()
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, smoothRGBA(120, 80), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	pb := encodePNG(t, randomRGBA(120, 80, 3))
	files := map[string][]byte{}
	for _, f := range []struct {
		ext  string
		data []byte
	}{{"jpg", jb.Bytes()}, {"png", pb}} {
		n := len(f.data)
		files["truncated-half."+f.ext] = f.data[:n/2]
		files["truncated-end."+f.ext] = f.data[:n-3]
		garbled := bytes.Clone(f.data)
		for i := n / 3; i < n-10; i += 7 {
			garbled[i] ^= 0x5a
		}
		files["garbled."+f.ext] = garbled
		files["header-only."+f.ext] = f.data[:min(n, 40)]
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		img, err := ReadImage(p)
		if err == nil {
			// Go's decoder may accept a damaged JPEG body; then it
			// must be Go's image, not libjpeg-turbo's warned one.
			if _, native := img.(*image.RGBA); native && strings.HasSuffix(name, ".jpg") {
				t.Fatalf("%s: a damaged JPEG was decoded natively", name)
			}
			continue
		}
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("%s: error does not name the file: %v", name, err)
		}
	}
}

// A file far larger than its pixels need (here 2 MiB after a small JPEG's
// end) is not read whole into memory for the native decoder: Go's
// streaming decoder takes it.
func TestNativeSkipsOversizedFiles(t *testing.T) {
	requireNative(t)
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, smoothRGBA(120, 80), &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	small := nativeDecode(t, jb.Bytes(), "small.jpg")
	if _, native := small.(*image.RGBA); !native {
		t.Fatalf("the plain JPEG was not decoded natively (%T)", small)
	}
	padded := append(bytes.Clone(jb.Bytes()), make([]byte, 2<<20)...)
	img := nativeDecode(t, padded, "padded.jpg")
	if _, native := img.(*image.RGBA); native {
		t.Fatalf("a %d-byte file of 120×80 pixels was read whole for the native decoder", len(padded))
	}
}
