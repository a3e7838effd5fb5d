package finetune

import (
	"testing"

	"github.com/segtune/segtune/metrics"
)

func TestEpochInfoString(t *testing.T) {
	v := func(x float64) *float64 { return &x }
	two := &metrics.Report{MeanIoU: v(0.5), Classes: []metrics.ClassReport{{Name: "bg", IoU: v(0.75)}, {Name: "person", IoU: v(0.25)}, {Name: "absent"}}}
	five := &metrics.Report{MeanIoU: v(0.5)}
	for range 5 {
		five.Classes = append(five.Classes, metrics.ClassReport{Name: "c", IoU: v(0.5)})
	}
	for _, tc := range []struct {
		e    EpochInfo
		want string
	}{
		{EpochInfo{Epoch: 0, Loss: 1.23456, Seconds: 3.21}, "epoch   1  loss 1.2346     3.2s"},
		{EpochInfo{Epoch: 9, Loss: 0.5, Seconds: 12, Val: two, Best: true}, "epoch  10  loss 0.5000    12.0s  val mIoU 0.5000 (bg 0.750, person 0.250)  *best"},
		{EpochInfo{Epoch: 1, Loss: 0.5, Seconds: 1, Val: five}, "epoch   2  loss 0.5000     1.0s  val mIoU 0.5000"},
	} {
		if got := tc.e.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
