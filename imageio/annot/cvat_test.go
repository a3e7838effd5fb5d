package annot

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testdata/cvat is an export laid out and written as CVAT writes one, by
// testdata/gen_cvat_reference.py.
func TestReadCVATMatchesReference(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "cvat_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Classes []string            `json:"classes"`
		Masks   map[string][]string `json:"masks"`
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "cvat")
	set, err := ReadCVAT(dir, CVATOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(set.Classes, want.Classes) {
		t.Errorf("classes %q, want %q", set.Classes, want.Classes)
	}
	var refs []string
	for _, s := range set.Samples {
		refs = append(refs, s.Ref)
		rows, ok := want.Masks[s.Ref]
		if !ok {
			t.Fatalf("unexpected sample %q", s.Ref)
		}
		if img := filepath.Join(dir, "JPEGImages", filepath.FromSlash(s.Ref)+".jpg"); s.Image != img {
			t.Errorf("image %q, want %q", s.Image, img)
		}
		if s.Width != len(rows[0]) || s.Height != len(rows) {
			t.Errorf("%s: %dx%d, want %dx%d", s.Ref, s.Width, s.Height, len(rows[0]), len(rows))
		}
		m, err := s.Mask()
		if err != nil {
			t.Fatal(err)
		}
		if got := maskRows(m, s.Width, s.Height); !slices.Equal(got, rows) {
			t.Errorf("%s: mask\n%s\nwant\n%s", s.Ref, strings.Join(got, "\n"), strings.Join(rows, "\n"))
		}
	}
	if !slices.Equal(refs, []string{"frame_000000", "sub/frame_000001"}) {
		t.Errorf("samples %q", refs)
	}
}

func writePNG(t *testing.T, path string, img image.Image) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

func TestReadCVATColours(t *testing.T) {
	dir := t.TempDir()
	lm := "# label:color_rgb:parts:actions\nbackground:0,0,0::\ncar:250,50,83::\nperson:36,179,83::\n"
	if err := os.WriteFile(filepath.Join(dir, "labelmap.txt"), []byte(lm), 0o644); err != nil {
		t.Fatal(err)
	}
	// A palette PNG whose palette order is not the labelmap's: colours,
	// not indices, decide.
	pal := &image.Paletted{Pix: []uint8{0, 1, 2, 0}, Stride: 2, Rect: image.Rect(0, 0, 2, 2),
		Palette: color.Palette{color.RGBA{36, 179, 83, 255}, color.RGBA{0, 0, 0, 255}, color.RGBA{250, 50, 83, 255}}}
	writePNG(t, filepath.Join(dir, "SegmentationClass", "a.png"), pal)
	set, err := ReadCVAT(dir, CVATOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := set.Samples[0]; s.Image != "" || s.Ref != "a" {
		t.Errorf("without JPEGImages: image %q ref %q", s.Image, s.Ref)
	}
	m, err := set.Samples[0].Mask()
	if err != nil || !slices.Equal(m, []uint8{2, 0, 1, 2}) {
		t.Fatalf("palette mask = %v, %v; want [2 0 1 2]", m, err)
	}

	// An unknown colour is named with its file and pixel, or ignored.
	rgb := image.NewNRGBA(image.Rect(0, 0, 3, 2))
	for i := range rgb.Pix {
		rgb.Pix[i] = 255 * uint8(i%4/3) // black, opaque
	}
	rgb.SetNRGBA(2, 1, color.NRGBA{1, 2, 3, 255})
	bad := filepath.Join(dir, "SegmentationClass", "a.png")
	writePNG(t, bad, rgb)
	_, err = set.Samples[0].Mask()
	var uc *UnknownColourError
	if !errors.As(err, &uc) || uc.File != bad || uc.X != 2 || uc.Y != 1 || uc.Colour != (color.RGBA{1, 2, 3, 255}) {
		t.Fatalf("got %v, want an UnknownColourError at (2,1) of %s", err, bad)
	}
	set, err = ReadCVAT(dir, CVATOptions{IgnoreUnknownColours: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := set.Samples[0].Mask(); err != nil || !slices.Equal(m, []uint8{0, 0, 0, 0, 0, Ignore}) {
		t.Fatalf("ignoring unknown colours: %v, %v", m, err)
	}
}

func TestReadCVATLabelmapRejects(t *testing.T) {
	many := strings.Builder{}
	for i := range 256 {
		fmt.Fprintf(&many, "l%d:%d,%d,0::\n", i, i%256, i/256)
	}
	for _, c := range []struct{ name, text, want string }{
		{"empty", "# label:color_rgb:parts:actions\n", "lists no labels"},
		{"no colour", "background::\n", "line 1: label \"background\": colour \"\""},
		{"bad colour", "# x\ncar:250,50::\n", "line 2: label \"car\": colour \"250,50\""},
		{"colour out of range", "car:256,0,0::\n", "each 0..255"},
		{"duplicate name", "car:1,1,1::\ncar:2,2,2::\n", "line 2: label \"car\" appears twice"},
		{"duplicate colour", "car:1,1,1::\nbus:1,1,1::\n", "line 2: label \"bus\" has the colour of \"car\""},
		{"no name", ":1,1,1::\n", "is not label:r,g,b"},
		{"too many", many.String(), "line 256: more than 255 labels"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "labelmap.txt")
			if err := os.WriteFile(p, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadCVATLabelmap(p)
			var e *Error
			if !errors.As(err, &e) || e.File != p || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an *Error naming %s with %q", err, p, c.want)
			}
		})
	}
	if _, err := ReadCVAT(t.TempDir(), CVATOptions{}); err == nil || !strings.Contains(err.Error(), "labelmap.txt") {
		t.Errorf("a folder without labelmap.txt: %v", err)
	}
}
