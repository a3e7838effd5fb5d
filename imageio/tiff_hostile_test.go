package imageio

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/image/tiff"
)

// hugeStripTIFF is a 300-byte 1000×1000 grey TIFF whose one strip claims
// 4 GiB.
func hugeStripTIFF() []byte {
	var b bytes.Buffer
	b.WriteString("II*\x00")
	binary.Write(&b, binary.LittleEndian, uint32(8))
	type entry struct {
		tag, typ uint16
		n, v     uint32
	}
	entries := []entry{
		{256, 4, 1, 1000}, {257, 4, 1, 1000}, {258, 3, 1, 8}, {259, 3, 1, 1}, {262, 3, 1, 1},
		{273, 4, 1, 200}, {277, 3, 1, 1}, {278, 4, 1, 1000}, {279, 4, 1, 0xFFFFFFF0},
	}
	binary.Write(&b, binary.LittleEndian, uint16(len(entries)))
	for _, e := range entries {
		binary.Write(&b, binary.LittleEndian, e)
	}
	binary.Write(&b, binary.LittleEndian, uint32(0))
	b.Write(make([]byte, 300-b.Len()))
	return b.Bytes()
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A TIFF whose header claims a strip of 4 GiB made Go's TIFF decoder
// allocate 8 GiB at once (image.Decode hands it a reader it cannot read
// at offsets), a crash under an address-space limit; it now reads the
// file in bounded chunks and fails at its end, whether the image comes
// from a file, bytes in memory or a stream (#45). A real TIFF decodes.
func TestTIFFClaimingHugeStripsIsBounded(t *testing.T) {
	file := hugeStripTIFF()
	path := filepath.Join(t.TempDir(), "x.tif")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, decode := range map[string]func() error{
		"file":   func() error { _, err := ReadImage(path); return err },
		"bytes":  func() error { _, err := DecodeImage(bytes.NewReader(file), "x.tif"); return err },
		"stream": func() error { _, err := DecodeImage(io.MultiReader(bytes.NewReader(file)), "x.tif"); return err },
	} {
		var err error
		if n := allocated(func() { err = decode() }); n > 64<<20 || err == nil {
			t.Errorf("%s: allocated %d MiB, error %v; want an error and a few MiB at most", name, n>>20, err)
		}
	}

	img := image.NewGray(image.Rect(0, 0, 30, 20))
	img.SetGray(3, 4, color.Gray{200})
	var good bytes.Buffer
	if err := tiff.Encode(&good, img, &tiff.Options{Compression: tiff.Deflate}); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]io.Reader{"bytes": bytes.NewReader(good.Bytes()), "stream": io.MultiReader(bytes.NewReader(good.Bytes()))} {
		got, err := DecodeImage(r, "good.tif")
		if err != nil || got.Bounds() != img.Bounds() || color.GrayModel.Convert(got.At(3, 4)).(color.Gray).Y != 200 {
			t.Errorf("%s: a real TIFF: %v", name, err)
		}
	}
	cfg, format, err := Decoder{}.Config(io.MultiReader(bytes.NewReader(good.Bytes())), "good.tif")
	if err != nil || format != "tiff" || cfg.Width != 30 || cfg.Height != 20 {
		t.Errorf("config of a streamed TIFF: %+v %s %v", cfg, format, err)
	}
}
