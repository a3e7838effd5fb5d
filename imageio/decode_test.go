package imageio

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

func TestDecodeFormats(t *testing.T) {
	src := randomRGBA(17, 9, 1)
	enc := map[string]func(io.Writer, image.Image) error{
		"png":  func(w io.Writer, m image.Image) error { _, err := w.Write(encodePNG(t, m)); return err },
		"jpeg": func(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, nil) },
		"gif":  func(w io.Writer, m image.Image) error { return gif.Encode(w, m, nil) },
		"bmp":  bmp.Encode,
		"tiff": func(w io.Writer, m image.Image) error { return tiff.Encode(w, m, nil) },
	}
	for name, e := range enc {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := e(&buf, src); err != nil {
				t.Fatal(err)
			}
			img, err := DecodeImage(bytes.NewReader(buf.Bytes()), "x."+name)
			if err != nil {
				t.Fatal(err)
			}
			if img.Bounds().Dx() != 17 || img.Bounds().Dy() != 9 {
				t.Fatalf("decoded size %v, want 17x9", img.Bounds())
			}
		})
	}
	t.Run("webp", func(t *testing.T) {
		// 1×1 lossless WebP.
		data, _ := base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
		img, err := DecodeImage(bytes.NewReader(data), "x.webp")
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds() != image.Rect(0, 0, 1, 1) {
			t.Fatalf("bounds %v", img.Bounds())
		}
	})
}

func TestDecodePNGExact(t *testing.T) {
	src := randomRGBA(31, 7, 2)
	img, err := DecodeImage(bytes.NewReader(encodePNG(t, src)), "a.png")
	if err != nil {
		t.Fatal(err)
	}
	got, ok := img.(*image.RGBA)
	if !ok || !bytes.Equal(got.Pix, src.Pix) {
		t.Fatalf("PNG round trip changed pixels (type %T)", img)
	}
}

// onlyReader hides Seek so the buffering path is exercised.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestDecodeNonSeeker(t *testing.T) {
	data := encodePNG(t, randomRGBA(5, 4, 3))
	img, err := DecodeImage(onlyReader{bytes.NewReader(data)}, "pipe")
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 5 {
		t.Fatalf("bounds %v", img.Bounds())
	}
}

func TestDecodeSeekerAtOffset(t *testing.T) {
	data := append([]byte("junk"), encodePNG(t, randomRGBA(5, 4, 3))...)
	r := bytes.NewReader(data)
	r.Seek(4, io.SeekStart)
	if _, err := DecodeImage(r, "offset"); err != nil {
		t.Fatalf("decoding from a non-zero offset: %v", err)
	}
}

func TestPixelLimit(t *testing.T) {
	data := encodePNG(t, randomRGBA(100, 50, 4))
	_, err := Decoder{MaxPixels: 4999}.Decode(bytes.NewReader(data), "big.png")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "big.png") || !strings.Contains(err.Error(), "100x50") {
		t.Fatalf("want ErrTooLarge naming file and size, got %v", err)
	}
	if _, err := (Decoder{MaxPixels: 5000}).Decode(bytes.NewReader(data), "ok.png"); err != nil {
		t.Fatalf("image at the limit refused: %v", err)
	}
}

// pngWithSize returns a PNG whose header claims w×h pixels but which holds
// the pixel data of a 1×1 image: a decompression bomb's header.
func pngWithSize(t *testing.T, w, h uint32) []byte {
	data := encodePNG(t, image.NewGray(image.Rect(0, 0, 1, 1)))
	// Signature (8) + IHDR length (4) + "IHDR" (4) → width at 16.
	binary.BigEndian.PutUint32(data[16:], w)
	binary.BigEndian.PutUint32(data[20:], h)
	crc := crc32.ChecksumIEEE(data[12:29])
	binary.BigEndian.PutUint32(data[29:], crc)
	return data
}

func TestDecompressionBombRefusedBeforeDecode(t *testing.T) {
	data := pngWithSize(t, 100000, 100000)
	_, err := DecodeImage(bytes.NewReader(data), "bomb.png")
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
	if !strings.Contains(err.Error(), "100000x100000") {
		t.Errorf("error should give the size: %v", err)
	}
}

func TestDecodeErrorsNameFile(t *testing.T) {
	dir := t.TempDir()
	p := writeTemp(t, dir, "broken.png", []byte("not an image at all"))
	_, err := ReadImage(p)
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("want error naming %s, got %v", p, err)
	}
	_, err = ReadImage(dir + "/missing.png")
	if err == nil || !strings.Contains(err.Error(), "missing.png") {
		t.Fatalf("want error naming missing.png, got %v", err)
	}
	// Truncated after a valid header: decode (not config) fails.
	full := encodePNG(t, randomRGBA(40, 40, 5))
	_, err = DecodeImage(bytes.NewReader(full[:len(full)/2]), "half.png")
	if err == nil || !strings.Contains(err.Error(), "half.png") {
		t.Fatalf("want error naming half.png, got %v", err)
	}
}

func TestDecodeGrayKeepsType(t *testing.T) {
	g := image.NewGray(image.Rect(0, 0, 3, 2))
	g.SetGray(1, 1, color.Gray{7})
	img, err := DecodeImage(bytes.NewReader(encodePNG(t, g)), "g.png")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := img.(*image.Gray); !ok || m.GrayAt(1, 1).Y != 7 {
		t.Fatalf("got %T", img)
	}
}

func TestDecoderConfigReadsTheHeaderOnly(t *testing.T) {
	var buf bytes.Buffer
	png.Encode(&buf, image.NewGray(image.Rect(0, 0, 30, 20)))
	full := buf.Len()
	// A reader that fails past the first 64 bytes: the header is enough.
	r := io.MultiReader(bytes.NewReader(buf.Bytes()[:64]), iotest.ErrReader(errors.New("read past the header")))
	cfg, format, err := Decoder{}.Config(r, "a.png")
	if err != nil || cfg.Width != 30 || cfg.Height != 20 || format != "png" {
		t.Fatalf("Config = %+v %q %v (file of %d bytes)", cfg, format, err, full)
	}
	if _, _, err := (Decoder{MaxPixels: 100}).Config(bytes.NewReader(buf.Bytes()), "a.png"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("pixel limit not applied: %v", err)
	}
	if _, _, err := (Decoder{}).Config(strings.NewReader("junk"), "j.png"); err == nil || !strings.Contains(err.Error(), "j.png") {
		t.Errorf("junk: %v", err)
	}
}
