package metrics

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestConfusionScores(t *testing.T) {
	m := NewConfusion(3, 255)
	target := []uint8{0, 0, 1, 1, 255, 1, 0}
	pred := []uint8{0, 1, 1, 1, 2, 0, 0}
	if err := m.Add(pred, target); err != nil {
		t.Fatal(err)
	}
	iou := m.IoU()
	// class 0: tp 2, true 3, pred 3 -> 2/4; class 1: tp 2, true 3, pred 3 -> 2/4;
	// class 2: never true, predicted only on an ignored pixel -> NaN.
	if iou[0] != 0.5 || iou[1] != 0.5 || !math.IsNaN(iou[2]) {
		t.Fatalf("IoU = %v", iou)
	}
	if got := m.MeanIoU(); got != 0.5 {
		t.Errorf("mean IoU = %v", got)
	}
	if got := m.PixelAccuracy(); math.Abs(got-4.0/6) > 1e-12 {
		t.Errorf("pixel accuracy = %v", got)
	}
	if m.Pixels() != 6 {
		t.Errorf("pixels = %d", m.Pixels())
	}
}

func TestConfusionRejectsBadLabels(t *testing.T) {
	m := NewConfusion(2, 255)
	if err := m.Add([]uint8{0}, []uint8{7}); err == nil || !strings.Contains(err.Error(), "label 7") {
		t.Errorf("err = %v", err)
	}
	if err := m.Add([]uint8{5}, []uint8{1}); err == nil {
		t.Error("out-of-range prediction accepted")
	}
	if err := m.Add([]uint8{0, 1}, []uint8{1}); err == nil {
		t.Error("size mismatch accepted")
	}
}

func TestReportJSONAndText(t *testing.T) {
	m := NewConfusion(3, 255)
	m.Add([]uint8{0, 1}, []uint8{0, 1})
	r := NewReport(m, []string{"background", "person"})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	json.Unmarshal(b, &back)
	if back["mean_iou"].(float64) != 1 {
		t.Errorf("json = %s", b)
	}
	cls := back["classes"].([]any)
	if cls[2].(map[string]any)["iou"] != nil || cls[1].(map[string]any)["name"] != "person" {
		t.Errorf("json = %s", b)
	}
	var buf bytes.Buffer
	r.WriteText(&buf)
	if !strings.Contains(buf.String(), "person") || !strings.Contains(buf.String(), "\nmean        1.0000  1.0000  1.0000  1.0000             2\n") {
		t.Errorf("text = %s", buf.String())
	}
}

func TestScoreImage(t *testing.T) {
	// true 0 0 1 1 2 (255 ignored), predicted 0 1 1 1 0: IoU 1/3, 2/3, 0.
	m, err := ScoreImage([]uint8{0, 1, 1, 1, 0, 2}, []uint8{0, 0, 1, 1, 2, 255}, 3, 255)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{1, 1, 0, 0, 2, 0, 1, 0, 0}
	for i, n := range want {
		if m.Counts[i] != n {
			t.Fatalf("counts %v, want %v", m.Counts, want)
		}
	}
	if iou := m.IoU(); math.Abs(iou[0]-1.0/3) > 1e-12 || math.Abs(iou[1]-2.0/3) > 1e-12 || iou[2] != 0 {
		t.Errorf("IoU %v", iou)
	}
	if _, err := ScoreImage([]uint8{0}, []uint8{0, 1}, 2, 255); err == nil {
		t.Error("prediction and mask of different sizes scored")
	}
}
