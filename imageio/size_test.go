package imageio

import "testing"

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		h, w int
		ok   bool
	}{
		{"512x256", 512, 256, true},
		{"513", 513, 513, true},
		{" 64 X 32 ", 64, 32, true},
		{"0x5", 0, 0, false},
		{"-3x4", 0, 0, false},
		{"4x", 0, 0, false},
		{"axb", 0, 0, false},
		{"", 0, 0, false},
	} {
		h, w, err := ParseSize(c.in)
		if (err == nil) != c.ok || h != c.h || w != c.w {
			t.Errorf("ParseSize(%q) = %d, %d, %v; want %d, %d, ok %v", c.in, h, w, err, c.h, c.w, c.ok)
		}
	}
}
