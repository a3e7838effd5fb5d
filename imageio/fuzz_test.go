package imageio

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"testing"
)

// Fuzz targets: whatever the bytes, decoding, mask reading and spec parsing
// return a value or an error, never panic.

func seedImages(f *testing.F) {
	f.Add(encodePNG(f, randomRGBA(3, 2, 1)))
	f.Add(encodePNG(f, grayMask(2, 2, []uint8{0, 1, 2, 255})))
	f.Add(encodePNG(f, image.NewGray16(image.Rect(0, 0, 2, 1))))
	f.Add(encodePNG(f, image.NewPaletted(image.Rect(0, 0, 2, 1), color.Palette{color.Black, color.White})))
	var buf bytes.Buffer
	jpeg.Encode(&buf, randomRGBA(8, 8, 2), nil)
	f.Add(buf.Bytes())
	buf.Reset()
	gif.Encode(&buf, randomRGBA(4, 4, 3), nil)
	f.Add(buf.Bytes())
	webp, _ := base64.StdEncoding.DecodeString("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")
	f.Add(webp)
	f.Add([]byte("BM"))
	f.Add([]byte{})
}

func FuzzDecodeImage(f *testing.F) {
	seedImages(f)
	p := Preprocess{Resize: ResizeLetterbox, Height: 7, Width: 5, ValueScale: 1 / 127.5, ValueOffset: -1}
	dst := make([]float32, 3*7*5)
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Decoder{MaxPixels: 1 << 16}.Decode(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		// Whatever decodes must also convert.
		if _, err := p.Tensor(img, dst); err != nil {
			t.Fatalf("decoded %T %v but Tensor failed: %v", img, img.Bounds(), err)
		}
	})
}

func FuzzReadMask(f *testing.F) {
	seedImages(f)
	lm, _ := ParseLabelMap("0:0;1-9:1;*:error")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opt := range []MaskOptions{
			{Decoder: Decoder{MaxPixels: 1 << 16}},
			{Decoder: Decoder{MaxPixels: 1 << 16}, Palette: VOCPalette(4), Map: lm, NumClasses: 2, Ignore: 255},
		} {
			m, err := DecodeMask(bytes.NewReader(data), "fuzz", opt)
			if err != nil {
				continue
			}
			if len(m.Labels) != m.Width*m.Height {
				t.Fatalf("%d labels for %dx%d", len(m.Labels), m.Width, m.Height)
			}
			if b, err := m.Uint8(nil); err == nil && m.Width > 0 {
				dst := make([]uint8, 4)
				if err := ResizeLabels(b, m.Width, m.Height, dst, 2, 2); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

func FuzzParseLabelMap(f *testing.F) {
	for _, s := range []string{"9,10:1;11:255;*:0", "", "*:error", "0-3:1;4:keep", "1-65535:0", "5-2:1", ";;", " 1 : 2 ; "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		m, err := ParseLabelMap(spec)
		if err != nil {
			return
		}
		// The canonical form parses back to the same map.
		canon := m.String()
		m2, err := ParseLabelMap(canon)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", canon, spec, err)
		}
		if m2.String() != canon {
			t.Fatalf("canonical form unstable: %q → %q", canon, m2.String())
		}
		for _, l := range []int32{0, 1, 9, 255, 65535} {
			a, okA := m.Map(l)
			b, okB := m2.Map(l)
			if a != b || okA != okB {
				t.Fatalf("%q and %q disagree on %d", spec, canon, l)
			}
		}
	})
}
