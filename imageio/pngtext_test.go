package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/internal/testassets"
)

// A text chunk written with a mask (the paletted fast path) and with an
// overlay (image/png) is found again, the image decodes unchanged, and
// PIL, which did not write it, reads the same text.
func TestPNGTextRoundTrip(t *testing.T) {
	mask, err := MaskImage([]uint8{0, 1, 2, 1, 0, 2}, 3, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	rgba := image.NewRGBA(image.Rect(0, 0, 4, 3))
	rgba.Set(1, 1, color.RGBA{200, 10, 10, 255})
	dir := t.TempDir()
	for name, img := range map[string]image.Image{"mask": mask, "overlay": rgba} {
		var b bytes.Buffer
		if err := EncodePNGText(&b, img, "Software", "segtune segment"); err != nil {
			t.Fatal(err)
		}
		v, found, err := ReadPNGText(bytes.NewReader(b.Bytes()), "Software")
		if err != nil || !found || v != "segtune segment" {
			t.Errorf("%s: read %q, %v, %v", name, v, found, err)
		}
		if _, found, _ := ReadPNGText(bytes.NewReader(b.Bytes()), "Author"); found {
			t.Errorf("%s: found a key that was not written", name)
		}
		back, err := png.Decode(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plain bytes.Buffer
		if err := EncodePNG(&plain, img); err != nil {
			t.Fatal(err)
		}
		want, _ := png.Decode(&plain)
		if !sameImage(back, want) {
			t.Errorf("%s: decodes differently with the text chunk", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".png"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	py := testassets.RequirePython(t, "PIL")
	out, err := exec.Command(py, "-c", `import sys
from PIL import Image
for p in sys.argv[1:]:
    im = Image.open(p); im.load(); print(im.text.get("Software"))`,
		filepath.Join(dir, "mask.png"), filepath.Join(dir, "overlay.png")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "segtune segment\nsegtune segment" {
		t.Errorf("PIL read %q (%v)", out, err)
	}
}

func sameImage(a, b image.Image) bool {
	if a.Bounds() != b.Bounds() {
		return false
	}
	for y := a.Bounds().Min.Y; y < a.Bounds().Max.Y; y++ {
		for x := a.Bounds().Min.X; x < a.Bounds().Max.X; x++ {
			r1, g1, b1, a1 := a.At(x, y).RGBA()
			r2, g2, b2, a2 := b.At(x, y).RGBA()
			if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
				return false
			}
		}
	}
	return true
}

// The chunk goes after the header however the encoder splits its writes.
func TestPNGTextAfterHeaderOneByteWrites(t *testing.T) {
	var whole bytes.Buffer
	if err := EncodePNG(&whole, image.NewGray(image.Rect(0, 0, 5, 5))); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	w := &afterHeader{w: &b, insert: []byte("CHUNK")}
	for _, c := range whole.Bytes() {
		if n, err := w.Write([]byte{c}); n != 1 || err != nil {
			t.Fatal(n, err)
		}
	}
	want := append(append(append([]byte{}, whole.Bytes()[:ihdrEnd]...), "CHUNK"...), whole.Bytes()[ihdrEnd:]...)
	if !bytes.Equal(b.Bytes(), want) {
		t.Error("the chunk is not right after the header")
	}
}

// countingReader fails the test's reads past limit bytes.
type countingReader struct {
	r     *bytes.Reader
	read  int
	limit int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.read += n; c.read > c.limit {
		return n, errors.New("read past the limit")
	}
	return n, err
}

// Files that are no PNG, cut short, or whose chunks claim gigabytes are
// answered from their first bytes: no text, no unbounded read.
func TestReadPNGTextHostile(t *testing.T) {
	var ok bytes.Buffer
	if err := EncodePNGText(&ok, image.NewGray(image.Rect(0, 0, 4, 4)), "Software", "x"); err != nil {
		t.Fatal(err)
	}
	huge := append([]byte{}, ok.Bytes()[:ihdrEnd]...)
	huge = binary.BigEndian.AppendUint32(huge, 0xfffffff0)
	huge = append(huge, "zzZz"...)
	huge = append(huge, make([]byte, 1<<17)...)
	for name, data := range map[string][]byte{
		"empty":       nil,
		"text":        []byte("name,label\nimg1,3\n"),
		"cut short":   ok.Bytes()[:ihdrEnd+10],
		"giant chunk": huge,
	} {
		r := &countingReader{r: bytes.NewReader(data), limit: 2 * maxHeaderChunks}
		_, found, err := ReadPNGText(r, "Software")
		if found {
			t.Errorf("%s: found text", name)
		}
		if r.read > maxHeaderChunks+ihdrEnd+64 {
			t.Errorf("%s: read %d bytes", name, r.read)
		}
		if name != "giant chunk" && !errors.Is(err, ErrNotPNG) {
			t.Errorf("%s: error %v, want ErrNotPNG", name, err)
		}
	}
	if err := EncodePNGText(&bytes.Buffer{}, image.NewGray(image.Rect(0, 0, 1, 1)), "bad\x00key", ""); err == nil {
		t.Error("a key with NUL was accepted")
	}
}
