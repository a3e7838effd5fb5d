package serve

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference"
	"github.com/segtune/segtune/models/contract"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/onnxtest"
	"github.com/segtune/segtune/runtime"
	"github.com/segtune/segtune/runtime/runtimetest"
)

// Each answered request gives its scores' buffer back (Output.Release),
// so that the next request's run writes into it instead of a fresh one:
// none is held once the answers are in.
func TestServeReleasesScores(t *testing.T) {
	runtimetest.Require(t)
	model, err := onnxtest.Build(onnxtest.Float).Marshal() // any segmenter will do
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Parse(model, "")
	if err != nil {
		t.Fatal(err)
	}
	ct, err := contract.Read(m, contract.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	seg, err := inference.Open(model, ct, imageio.Preprocess{Height: 8, Width: 8}, runtime.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	opt := DefaultOptions()
	opt.MaxBatch = 1
	srv := New(seg, opt)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 37)
	}
	img.Set(0, 0, color.RGBA{255, 255, 255, 255})
	var body bytes.Buffer
	if err := png.Encode(&body, img); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r, err := hs.Client().Post(hs.URL+"/v1/segment", "image/png", bytes.NewReader(body.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s: %s", i+1, r.Status, answer)
		}
		// The handler's Release runs before it returns, which is before
		// the answer's end reaches the client.
		if held := seg.ScoresHeld(); held != 0 {
			t.Fatalf("after %d answered requests %d score buffers are still held: Release was not called", i+1, held)
		}
	}
}
