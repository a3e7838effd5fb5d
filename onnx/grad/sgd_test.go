package grad_test

import (
	"testing"

	"github.com/segtune/segtune/internal/testassets"
	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
	"github.com/segtune/segtune/runtime"
)

// TestSGDReducesLoss runs a few plain SGD steps in Go on one tiny batch of
// the shared person model and expects the loss to fall.
func TestSGDReducesLoss(t *testing.T) {
	path := testassets.Require(t, "models", "deeplabv3plus_person_dynamic.onnx")
	m, err := onnx.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	const h, w = 33, 33
	gs, err := grad.Build(m, grad.Config{
		Prober:      ortprobe.Prober{},
		Trainable:   []string{"decoder_*", "logits_*"},
		InputShapes: map[string][]int64{"input": {1, 3, h, w}},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := gs.Training.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s, err := runtime.NewSession(data, runtime.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	img := make([]float32, 3*h*w)
	target := make([]int64, h*w)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			on := (x-16)*(x-16)+(y-16)*(y-16) < 80
			for c := 0; c < 3; c++ {
				img[c*h*w+y*w+x] = -0.5
				if on {
					img[c*h*w+y*w+x] = 0.6
				}
			}
			if on {
				target[y*w+x] = 1
			}
		}
	}
	target[0] = 255 // one ignored pixel
	params := map[string][]float32{}
	for _, p := range gs.Params {
		v, err := onnx.Float32s(p)
		if err != nil {
			t.Fatal(err)
		}
		params[p.GetName()] = v
	}
	dims := map[string][]int64{}
	for _, p := range gs.Params {
		dims[p.GetName()] = p.GetDims()
	}
	step := func() float32 {
		in := make([]*runtime.Tensor, len(s.Inputs))
		for i, x := range s.Inputs {
			switch x.Name {
			case "input":
				in[i] = runtime.NewFloat32([]int64{1, 3, h, w}, img)
			case grad.TargetName:
				in[i] = runtime.NewInt64([]int64{1, h, w}, target)
			default:
				in[i] = runtime.NewFloat32(dims[x.Name], params[x.Name])
			}
		}
		out, err := s.Run(in...)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range gs.Manifest.Params {
			g := out[s.OutputIndex(p.Grad)].Float32
			v := params[p.Name]
			for i := range v {
				v[i] -= 0.05 * g[i]
			}
		}
		return out[s.OutputIndex(grad.LossName)].Float32[0]
	}
	first := step()
	var last float32
	for i := 0; i < 5; i++ {
		last = step()
	}
	t.Logf("loss %.4f → %.4f", first, last)
	if !(last < first*0.9) {
		t.Errorf("loss did not fall: %.4f → %.4f", first, last)
	}
}
