package resolve

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/internal/setting"
	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

func TestOpenSegmenter(t *testing.T) {
	runtimetest.Require(t)
	if err := runtime.Init(""); err != nil {
		t.Fatal(err)
	}
	session := runtime.Options{Threads: 1}
	pre := imageio.Sidecar{Preprocess: &imageio.Preprocess{ValueScale: 1 / 127.5, ValueOffset: -1}}

	model := testassets.Generated(t, "foreign", "synth_softmax.onnx")
	seg, err := OpenSegmenter(model, pre, SegmenterOptions{Session: session})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	if seg.Name != model || seg.Contract.Classes != 3 {
		t.Errorf("Name %q, %d classes; want %q, 3", seg.Name, seg.Contract.Classes, model)
	}
	var pe *inference.PaletteError
	err = seg.CheckPalette(imageio.Palette{{0, 0, 0, 255}, {255, 0, 0, 255}})
	if !errors.As(err, &pe) || err.Error() != model+" predicts 3 classes; the palette has 2 colours" {
		t.Errorf("a palette of 2 colours: %v; want a *PaletteError naming %s", err, model)
	}

	// A fixed-size model cannot take tiles: refused once opened.
	fixed := testassets.Generated(t, "foreign", "fixed_lraspp_b1_constsizes.onnx")
	tiles := &inference.Dense{TileHeight: 32, TileWidth: 32, Overlap: inference.DefaultOverlap}
	seg, err = OpenSegmenter(fixed, pre, SegmenterOptions{Session: session, Dense: tiles})
	if err == nil {
		seg.Close()
	}
	flag := func(key string) string { return "--" + key }
	if named := setting.Rename(err, flag); !errors.Is(err, inference.ErrDense) || !strings.HasPrefix(named.Error(), "--tile/--tta: "+inference.ErrDense.Error()) {
		t.Errorf("tiles on a fixed-size model: %v; want inference.ErrDense, named by the settings tile and tta", named)
	}

	missing := filepath.Join(t.TempDir(), "absent.onnx")
	if _, err := OpenSegmenter(missing, pre, SegmenterOptions{Session: session}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("an absent model: %v; want an error naming %s", err, missing)
	}
}
