package trainer

import (
	"slices"
	"testing"

	"github.com/segtune/segtune/finetune/optim"
)

// boxHead puts a head that left the box back on it.
func TestBoxHead(t *testing.T) {
	r := &regularizer{cfg: RegularizerConfig{ScoreBound: 2}, channels: 4,
		headW: &optim.Param{Data: []float32{0.7, -0.1, -0.6, 0.4}}, headB: &optim.Param{Data: []float32{-3}}}
	if err := r.boxHead(&stepper{}); err != nil { // the host form: no device to sync
		t.Fatal(err)
	}
	if want := []float32{0.5, -0.1, -0.5, 0.4}; !slices.Equal(r.headW.Data, want) || r.headB.Data[0] != -2 {
		t.Fatalf("boxed head %v, %v; want %v, -2", r.headW.Data, r.headB.Data, want)
	}
}
