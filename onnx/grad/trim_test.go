package grad_test

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/onnx"
	"github.com/segtune/segtune/onnx/grad"
	"github.com/segtune/segtune/onnx/grad/ortprobe"
)

// TestTrimDeadTaps: convolutions whose outer taps read only padding run as
// the smaller convolution, with unchanged gradients (0 for the dead taps).
func TestTrimDeadTaps(t *testing.T) {
	cases := []struct {
		name   string
		h, w   int64
		attrs  []*onnx.AttributeProto
		kernel []int64 // kernel_shape after trimming
	}{
		{"both_sides_1x1", 3, 3, []*onnx.AttributeProto{ais("dilations", 4, 4), ais("pads", 4, 4, 4, 4)}, []int64{1, 1}},
		{"one_side", 6, 3, []*onnx.AttributeProto{ais("dilations", 4, 4), ais("pads", 4, 4, 0, 4)}, []int64{2, 1}},
		{"aspp_rate12", 8, 8, []*onnx.AttributeProto{ais("dilations", 12, 12), ais("pads", 12, 12, 12, 12)}, []int64{1, 1}},
		{"aspp_rate6_kept", 8, 8, []*onnx.AttributeProto{ais("dilations", 6, 6), ais("pads", 6, 6, 6, 6)}, []int64{3, 3}},
		{"strided", 5, 5, []*onnx.AttributeProto{ais("strides", 2, 2), ais("dilations", 5, 1), ais("pads", 5, 1, 5, 1)}, []int64{1, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newOpModel(13)
			m.node("Conv", []string{m.rand("x", 2, 3, tc.h, tc.w), m.rand("w", 4, 3, 3, 3), m.rand("b", 4)}, []string{"y"}, tc.attrs...)
			m.outs = []string{"y"}
			gs, err := grad.Build(m.model(), grad.Config{Prober: ortprobe.Prober{}, Trainable: m.params, Loss: grad.Loss{Kind: grad.LossNone}, GradInputs: m.outs})
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, n := range gs.Training.Proto.Graph.Node {
				if n.GetOpType() == "Conv" && slices.Contains(n.Output, "y") {
					for _, a := range n.Attribute {
						if a.GetName() == "kernel_shape" {
							got = a.GetInts()
						}
					}
				}
			}
			if got == nil {
				got = []int64{3, 3}
			}
			if !slices.Equal(got, tc.kernel) {
				t.Errorf("forward kernel_shape %v, want %v", got, tc.kernel)
			}
			m.check(t)
		})
	}
}
