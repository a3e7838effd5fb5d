package imageio

import (
	"image"
	"image/draw"
)

// rgbaView is a read-only window on 8-bit RGBA pixels (4 bytes per pixel,
// premultiplied), the single format the resampler reads.
type rgbaView struct {
	pix    []byte
	stride int
	w, h   int
}

// viewRGBA returns img's pixels as RGBA, without copying when img already is
// (opaque) RGBA/NRGBA, otherwise converting into buf, which is grown as
// needed and returned for reuse. Transparent pixels end up composited over
// black, the same for every source type.
func viewRGBA(img image.Image, buf *image.RGBA) (rgbaView, *image.RGBA) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	switch m := img.(type) {
	case *image.RGBA:
		return rgbaView{m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, w, h}, buf
	case *image.NRGBA:
		if opaqueNRGBA(m) {
			// Opaque NRGBA has the same bytes as RGBA.
			return rgbaView{m.Pix[m.PixOffset(b.Min.X, b.Min.Y):], m.Stride, w, h}, buf
		}
	}
	buf = growRGBA(buf, w, h)
	switch m := img.(type) {
	case *image.Gray:
		grayToRGBA(buf, m)
	case *image.Paletted:
		palettedToRGBA(buf, m)
	default:
		// draw has fast paths for YCbCr (JPEG) and NRGBA; the rest
		// (CMYK, 16-bit) go through the generic path.
		draw.Draw(buf, buf.Rect, img, b.Min, draw.Src)
	}
	return rgbaView{buf.Pix, buf.Stride, w, h}, buf
}

func growRGBA(buf *image.RGBA, w, h int) *image.RGBA {
	n := 4 * w * h
	if buf == nil || cap(buf.Pix) < n {
		return image.NewRGBA(image.Rect(0, 0, w, h))
	}
	return &image.RGBA{Pix: buf.Pix[:n], Stride: 4 * w, Rect: image.Rect(0, 0, w, h)}
}

func opaqueNRGBA(m *image.NRGBA) bool {
	b := m.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		i := m.PixOffset(b.Min.X, y)
		row := m.Pix[i : i+4*b.Dx()]
		for j := 3; j < len(row); j += 4 {
			if row[j] != 0xff {
				return false
			}
		}
	}
	return true
}

func grayToRGBA(dst *image.RGBA, m *image.Gray) {
	b := m.Bounds()
	for y := 0; y < b.Dy(); y++ {
		i := m.PixOffset(b.Min.X, b.Min.Y+y)
		src := m.Pix[i : i+b.Dx()]
		out := dst.Pix[y*dst.Stride : y*dst.Stride+4*len(src)]
		for x, v := range src {
			o := out[4*x : 4*x+4 : 4*x+4]
			o[0], o[1], o[2], o[3] = v, v, v, 0xff
		}
	}
}

func palettedToRGBA(dst *image.RGBA, m *image.Paletted) {
	// Index → premultiplied RGBA. Indices past the end of a short palette
	// read as transparent black instead of failing.
	var lut [256][4]byte
	for i, c := range m.Palette {
		if i >= len(lut) {
			break
		}
		r, g, bl, a := c.RGBA()
		lut[i] = [4]byte{byte(r >> 8), byte(g >> 8), byte(bl >> 8), byte(a >> 8)}
	}
	b := m.Bounds()
	for y := 0; y < b.Dy(); y++ {
		i := m.PixOffset(b.Min.X, b.Min.Y+y)
		src := m.Pix[i : i+b.Dx()]
		out := dst.Pix[y*dst.Stride : y*dst.Stride+4*len(src)]
		for x, v := range src {
			copy(out[4*x:4*x+4], lut[v][:])
		}
	}
}
