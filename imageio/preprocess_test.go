package imageio

import (
	"encoding/json"
	"image"
	"image/color"
	"image/draw"
	"math"
	"strings"
	"testing"
)

func TestPreprocessValidate(t *testing.T) {
	bad := []struct {
		p    Preprocess
		want string
	}{
		{Preprocess{Resize: "zoom", Height: 1, Width: 1}, "unknown resize"},
		{Preprocess{Resize: ResizeStretch}, "needs height and width"},
		{Preprocess{Resize: ResizeLetterbox, Height: 10}, "needs height and width"},
		{Preprocess{Resize: ResizeScale}, "scale_factor"},
		{Preprocess{Resize: ResizeScale, ScaleFactor: math.NaN()}, "scale_factor"},
		{Preprocess{Height: -1, Width: 4}, "needs height and width"},
		{Preprocess{Interpolation: "cubic"}, "interpolation"},
		{Preprocess{ChannelOrder: "RGBA"}, "channel_order"},
		{Preprocess{Layout: "CHW"}, "layout"},
		{Preprocess{PadPosition: "bottom"}, "pad_position"},
		{Preprocess{Mean: []float64{1, 2}}, "3 values"},
		{Preprocess{Mean: []float64{0, 0, 0}, Std: []float64{1, 0, 1}}, "std > 0"},
		{Preprocess{Mean: []float64{0, 0, 0}, ValueScale: 2}, "not both"},
		{Preprocess{MeanStdRange: "0..9"}, "mean_std_range"},
		{Preprocess{ValueScale: math.Inf(1)}, "finite"},
		{Preprocess{Resize: ResizeScale, ScaleFactor: 2, MultipleOf: -8}, "multiple_of"},
	}
	for _, c := range bad {
		err := c.p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want error containing %q, got %v", c.p, c.want, err)
		}
	}
	good := []Preprocess{
		{},
		{Height: 513, Width: 513},
		{Resize: "pad", Height: 5, Width: 5, PadPosition: "top_left"},
		{Resize: ResizeScale, ScaleFactor: 2, MultipleOf: 8, PlusOne: true},
		{Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}},
		{ChannelOrder: "bgr", Layout: "nhwc", Interpolation: "nearest"},
	}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

func TestGeometry(t *testing.T) {
	cases := []struct {
		name string
		p    Preprocess
		w, h int
		want Geometry
	}{
		{"stretch", Preprocess{Height: 513, Width: 513}, 480, 360,
			Geometry{480, 360, 513, 513, image.Rect(0, 0, 513, 513)}},
		// 513/480 = 1.06875; 360·1.06875 = 384.75 → 385 rows, (513-385)/2 = 64.
		{"letterbox", Preprocess{Resize: ResizeLetterbox, Height: 513, Width: 513}, 480, 360,
			Geometry{480, 360, 513, 513, image.Rect(0, 64, 513, 449)}},
		{"letterbox top_left", Preprocess{Resize: ResizeLetterbox, Height: 513, Width: 513, PadPosition: "top_left"}, 480, 360,
			Geometry{480, 360, 513, 513, image.Rect(0, 0, 513, 385)}},
		{"letterbox tall", Preprocess{Resize: ResizeLetterbox, Height: 100, Width: 100}, 50, 200,
			Geometry{50, 200, 100, 100, image.Rect(37, 0, 62, 100)}},
		{"none", Preprocess{}, 480, 360, Geometry{480, 360, 480, 360, image.Rect(0, 0, 480, 360)}},
		{"scale 721x961", Preprocess{Resize: ResizeScale, ScaleFactor: 2, MultipleOf: 8, PlusOne: true}, 480, 360,
			Geometry{480, 360, 961, 721, image.Rect(0, 0, 961, 721)}},
		{"scale half", Preprocess{Resize: ResizeScale, ScaleFactor: 0.5}, 480, 360,
			Geometry{480, 360, 240, 180, image.Rect(0, 0, 240, 180)}},
	}
	for _, c := range cases {
		g, err := c.p.Geometry(c.w, c.h)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if g != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, g, c.want)
		}
	}
	if g, _ := (&Preprocess{}).Geometry(480, 360); !g.Identity() || g.Len() != 3*480*360 {
		t.Errorf("none: identity %v len %d", g.Identity(), g.Len())
	}
	_, err := (&Preprocess{Resize: ResizeNone, Height: 513, Width: 513}).Geometry(480, 360)
	if err == nil || !strings.Contains(err.Error(), "480x360") || !strings.Contains(err.Error(), "513x513") {
		t.Errorf("none with a different size: want error with both sizes, got %v", err)
	}
	_, err = (&Preprocess{Resize: ResizeScale, ScaleFactor: 60}).Geometry(4000, 3000)
	if err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("oversized scale: got %v", err)
	}
}

// TestNormalisationNumbers checks every layout, order and normalisation on
// a uniform image, where resampling cannot blur the expected values.
func TestNormalisationNumbers(t *testing.T) {
	img := uniformRGBA(7, 5, color.RGBA{255, 128, 0, 255})
	cases := []struct {
		name string
		p    Preprocess
		want [3]float32 // tensor channel order
	}{
		{"raw", Preprocess{}, [3]float32{255, 128, 0}},
		{"deeplab", Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1}, [3]float32{1, 128/127.5 - 1, -1}},
		{"imagenet unit", Preprocess{Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225}},
			[3]float32{(1 - 0.485) / 0.229, (128.0/255 - 0.456) / 0.224, (0 - 0.406) / 0.225}},
		{"caffe bgr bytes", Preprocess{ChannelOrder: BGR, Mean: []float64{103.94, 116.78, 123.68}, MeanStdRange: RangeByte},
			[3]float32{0 - 103.94, 128 - 116.78, 255 - 123.68}},
		{"bgr raw", Preprocess{ChannelOrder: BGR}, [3]float32{0, 128, 255}},
	}
	for _, c := range cases {
		for _, layout := range []Layout{NCHW, NHWC} {
			for _, size := range [][2]int{{0, 0}, {9, 4}} {
				p := c.p
				p.Layout = layout
				p.Height, p.Width = size[0], size[1]
				data, g, err := p.NewTensor(img)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				n := g.Width * g.Height
				for i := 0; i < n; i++ {
					for ch := 0; ch < 3; ch++ {
						v := data[ch*n+i]
						if layout == NHWC {
							v = data[i*3+ch]
						}
						if math.Abs(float64(v-c.want[ch])) > 1e-4 {
							t.Fatalf("%s %s %v: pixel %d channel %d = %v, want %v", c.name, layout, size, i, ch, v, c.want[ch])
						}
					}
				}
			}
		}
	}
}

// reference is a slow, obviously correct float64 implementation of Tensor
// for NCHW RGB raw values, used to check the optimised paths.
func reference(img image.Image, p Preprocess) ([]float64, Geometry) {
	b := img.Bounds()
	g, err := p.Geometry(b.Dx(), b.Dy())
	if err != nil {
		panic(err)
	}
	n := g.Width * g.Height
	out := make([]float64, 3*n)
	px := func(x, y int) [3]float64 {
		r, gg, bb, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
		return [3]float64{float64(r >> 8), float64(gg >> 8), float64(bb >> 8)}
	}
	c := g.Content
	sx := float64(b.Dx()) / float64(c.Dx())
	sy := float64(b.Dy()) / float64(c.Dy())
	for y := 0; y < g.Height; y++ {
		for x := 0; x < g.Width; x++ {
			var v [3]float64
			switch {
			case !image.Pt(x, y).In(c):
				v = [3]float64{float64(p.PadColor[0]), float64(p.PadColor[1]), float64(p.PadColor[2])}
			case p.Interpolation == Nearest:
				ix := min(int(math.Floor((float64(x-c.Min.X)+0.5)*sx)), b.Dx()-1)
				iy := min(int(math.Floor((float64(y-c.Min.Y)+0.5)*sy)), b.Dy()-1)
				v = px(ix, iy)
			default:
				fx := math.Max((float64(x-c.Min.X)+0.5)*sx-0.5, 0)
				fy := math.Max((float64(y-c.Min.Y)+0.5)*sy-0.5, 0)
				x0, y0 := min(int(fx), b.Dx()-1), min(int(fy), b.Dy()-1)
				x1, y1 := min(x0+1, b.Dx()-1), min(y0+1, b.Dy()-1)
				wx, wy := fx-float64(x0), fy-float64(y0)
				if x0 == b.Dx()-1 {
					wx = 0
				}
				if y0 == b.Dy()-1 {
					wy = 0
				}
				p00, p10, p01, p11 := px(x0, y0), px(x1, y0), px(x0, y1), px(x1, y1)
				for ch := range v {
					top := p00[ch]*(1-wx) + p10[ch]*wx
					bot := p01[ch]*(1-wx) + p11[ch]*wx
					v[ch] = top*(1-wy) + bot*wy
				}
			}
			for ch := range v {
				out[ch*n+y*g.Width+x] = v[ch]
			}
		}
	}
	return out, g
}

func TestResampleMatchesReference(t *testing.T) {
	img := randomRGBA(48, 36, 7)
	sizes := []Preprocess{
		{Height: 51, Width: 51}, // up, non-uniform
		{Height: 20, Width: 13}, // down
		{Height: 36, Width: 48}, // same size
		{Height: 1, Width: 1},   // degenerate
		{Resize: ResizeLetterbox, Height: 51, Width: 51, PadColor: [3]uint8{10, 20, 30}},
		{Resize: ResizeLetterbox, Height: 30, Width: 60, PadPosition: "top_left"},
		{Resize: ResizeScale, ScaleFactor: 2, MultipleOf: 8, PlusOne: true},
		{},
	}
	for _, base := range sizes {
		for _, interp := range []Interpolation{Bilinear, Nearest} {
			p := base
			p.Interpolation = interp
			got, g, err := p.NewTensor(img)
			if err != nil {
				t.Fatal(err)
			}
			want, wg := reference(img, p)
			if g != wg {
				t.Fatalf("%+v: geometry %+v vs %+v", p, g, wg)
			}
			for i := range want {
				if math.Abs(float64(got[i])-want[i]) > 1e-3 {
					t.Fatalf("%+v: value %d = %v, reference %v", p, i, got[i], want[i])
				}
			}
		}
	}
}

func TestLayoutsAreTransposes(t *testing.T) {
	img := randomRGBA(30, 20, 8)
	p := Preprocess{Height: 25, Width: 41, ChannelOrder: BGR, ValueScale: 0.5, ValueOffset: 3}
	a, g, err := p.NewTensor(img)
	if err != nil {
		t.Fatal(err)
	}
	p.Layout = NHWC
	b, _, err := p.NewTensor(img)
	if err != nil {
		t.Fatal(err)
	}
	n := g.Width * g.Height
	for i := 0; i < n; i++ {
		for c := 0; c < 3; c++ {
			if a[c*n+i] != b[i*3+c] {
				t.Fatalf("pixel %d channel %d: NCHW %v NHWC %v", i, c, a[c*n+i], b[i*3+c])
			}
		}
	}
	// BGR puts blue first: compare with RGB.
	p.Layout, p.ChannelOrder = NCHW, RGB
	rgb, _, _ := p.NewTensor(img)
	for i := 0; i < n; i++ {
		if rgb[i] != a[2*n+i] || rgb[2*n+i] != a[i] || rgb[n+i] != a[n+i] {
			t.Fatalf("pixel %d: BGR is not RGB reversed", i)
		}
	}
}

// TestSourceTypes checks that every decoded image type gives the tensor of
// its RGBA equivalent.
func TestSourceTypes(t *testing.T) {
	base := randomRGBA(21, 14, 9)
	p := Preprocess{Height: 30, Width: 17, ValueScale: 1 / 127.5, ValueOffset: -1}
	convert := func(dst draw.Image) image.Image {
		draw.Draw(dst, dst.Bounds(), base, image.Point{}, draw.Src)
		return dst
	}
	r := base.Rect
	gray := convert(image.NewGray(r)).(*image.Gray)
	pal := convert(image.NewPaletted(r, palette256())).(*image.Paletted)
	ycc := image.NewYCbCr(r, image.YCbCrSubsampleRatio444)
	for y := 0; y < r.Dy(); y++ {
		for x := 0; x < r.Dx(); x++ {
			c := base.RGBAAt(x, y)
			ycc.Y[ycc.YOffset(x, y)], ycc.Cb[ycc.COffset(x, y)], ycc.Cr[ycc.COffset(x, y)] = color.RGBToYCbCr(c.R, c.G, c.B)
		}
	}
	// A sub-image whose Min is not the origin.
	big := randomRGBA(40, 30, 10)
	draw.Draw(big, image.Rect(5, 6, 26, 20), base, image.Point{}, draw.Src)
	sub := big.SubImage(image.Rect(5, 6, 26, 20))

	srcs := map[string]struct{ img, equiv image.Image }{
		"RGBA":         {base, base},
		"NRGBA opaque": {convert(image.NewNRGBA(r)), base},
		"RGBA64":       {convert(image.NewRGBA64(r)), base},
		"sub-image":    {sub, base},
		"Gray":         {gray, gray},
		"Paletted":     {pal, pal},
		"YCbCr":        {ycc, ycc},
	}
	// Transparent NRGBA composites over black, like premultiplied RGBA.
	nt := image.NewNRGBA(image.Rect(0, 0, 2, 1))
	nt.Pix = []uint8{200, 100, 50, 128, 10, 20, 30, 255}
	rt := image.NewRGBA(nt.Rect)
	rt.Pix = []uint8{100, 50, 25, 128, 10, 20, 30, 255}
	srcs["NRGBA translucent"] = struct{ img, equiv image.Image }{nt, rt}
	for name, s := range srcs {
		got, _, err := p.NewTensor(s.img)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, _ := reference(s.equiv, Preprocess{Height: p.Height, Width: p.Width})
		for i := range want {
			w := float32(want[i]/127.5 - 1)
			if math.Abs(float64(got[i]-w)) > 0.02 { // YCbCr conversion rounding
				t.Fatalf("%s: value %d = %v, want %v", name, i, got[i], w)
			}
		}
	}
}

func palette256() color.Palette {
	p := make(color.Palette, 256)
	for i := range p {
		p[i] = color.RGBA{uint8(i), uint8(i * 7), uint8(255 - i), 255}
	}
	return p
}

func TestTensorBufferSlot(t *testing.T) {
	img := randomRGBA(8, 6, 11)
	p := Preprocess{Height: 4, Width: 5}
	g, _ := p.Geometry(8, 6)
	if _, err := p.Tensor(img, make([]float32, g.Len()-1)); err == nil || !strings.Contains(err.Error(), "need 60") {
		t.Fatalf("short buffer: got %v", err)
	}
	// Second slot of a batch of two: neighbours stay untouched.
	batch := make([]float32, 3*g.Len())
	for i := range batch {
		batch[i] = -42
	}
	if _, err := p.Tensor(img, batch[g.Len():]); err != nil {
		t.Fatal(err)
	}
	for i, v := range batch {
		inSlot := i >= g.Len() && i < 2*g.Len()
		if inSlot == (v == -42) {
			t.Fatalf("index %d = %v (in slot: %v)", i, v, inSlot)
		}
	}
}

func TestTensorDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	img := randomRGBA(48, 36, 12)
	p := Preprocess{Height: 51, Width: 51, ValueScale: 1 / 127.5, ValueOffset: -1}
	dst := make([]float32, 3*51*51)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := p.Tensor(img, dst); err != nil {
			t.Fatal(err)
		}
	})
	// The pool may be emptied by a GC between runs; steady state is zero.
	if allocs >= 1 {
		t.Fatalf("Tensor allocates %.1f times per call", allocs)
	}
}

func TestPreprocessJSONFieldNames(t *testing.T) {
	p := Preprocess{Height: 513, Width: 513, Resize: ResizeLetterbox, ScaleFactor: 2, MultipleOf: 8, PlusOne: true,
		PadColor: [3]uint8{1, 2, 3}, PadPosition: "top_left", Interpolation: Nearest, ChannelOrder: BGR, Layout: NHWC,
		Mean: []float64{1, 2, 3}, Std: []float64{4, 5, 6}, MeanStdRange: RangeByte, ValueScale: 0.5, ValueOffset: -1}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"height":513,"width":513,"resize":"letterbox","scale_factor":2,"multiple_of":8,"plus_one":true,` +
		`"pad_color":[1,2,3],"pad_position":"top_left","interpolation":"nearest","channel_order":"BGR","layout":"NHWC",` +
		`"mean":[1,2,3],"std":[4,5,6],"mean_std_range":"0..255","value_scale":0.5,"value_offset":-1}`
	if string(data) != want {
		t.Fatalf("JSON\n got %s\nwant %s", data, want)
	}
	var back Preprocess
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.PadColor != p.PadColor || back.Layout != p.Layout || back.ValueOffset != -1 || len(back.Std) != 3 {
		t.Fatalf("round trip: %+v", back)
	}
	if data, _ := json.Marshal(Preprocess{}); string(data) != "{}" {
		t.Fatalf("zero value marshals to %s, want {}", data)
	}
}
