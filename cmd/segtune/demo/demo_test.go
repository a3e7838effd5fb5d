package demo

import (
	"reflect"
	"slices"
	"testing"

	"github.com/segtune/segtune/finetune"
	"github.com/segtune/segtune/finetune/history"
	"github.com/segtune/segtune/metrics"
	"github.com/segtune/segtune/models"
)

// The demo's two runs differ only in the regularizer, which is finetune's
// default at the weight asked for.
func TestRunsDifferOnlyInTheRegularizer(t *testing.T) {
	entry, err := models.Lookup(models.SynthName)
	if err != nil {
		t.Fatal(err)
	}
	sc := Data(16, 8)
	base := Config("m.onnx", "data", sc, entry, 2, 1)
	if sc.Train != 16 || sc.Val != 8 || base.Height != sc.Height || base.Epochs != 2 || !base.Balanced || !base.Augment.WholeFrame {
		t.Fatalf("data %+v, config %+v", sc, base)
	}
	runs := Runs(base, 0.5)
	if len(runs) != 2 || runs[0].Config.Regularizer != nil || !reflect.DeepEqual(runs[1].Config.Regularizer, finetune.DefaultRegularizer(0.5)) {
		t.Fatalf("runs %+v", runs)
	}
	reg := runs[1].Config
	reg.Regularizer = nil
	if !reflect.DeepEqual(reg, runs[0].Config) || runs[1].Name != "F1 α=0.5" {
		t.Errorf("the regularised run %q differs from the baseline in more than the regularizer", runs[1].Name)
	}
}

// A run's row: the last epoch's validation mIoU and size scores, the mean
// epoch time and the projections summed over epochs; "—" for a score the
// run did not record.
func TestTableRow(t *testing.T) {
	miou := 0.625
	last := finetune.EpochInfo{Val: &metrics.Report{MeanIoU: &miou}}
	epochs := []history.Record{
		{Kind: history.KindEpoch, Seconds: 2, Extra: map[string]float64{"reg_projections": 1}},
		{Kind: history.KindEpoch, Seconds: 4, Extra: map[string]float64{"reg_projections": 2, "val_miou_small": 0.5}},
	}
	got := tableRow("r", last, epochs)
	want := []string{"r", "0.6250", "0.5000", "—", "—", "—", "3.0", "3"}
	if !slices.Equal(got, want) || len(got) != len(TableHeader) {
		t.Errorf("row %q, want %q", got, want)
	}
}
