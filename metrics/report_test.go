package metrics

import "testing"

// ClassIoU is nil for a class the report lacks or cannot score.
func TestClassIoU(t *testing.T) {
	m := NewConfusion(3, 255)
	if err := m.Add([]uint8{0, 1, 1, 0}, []uint8{0, 1, 0, 0}); err != nil {
		t.Fatal(err)
	}
	r := NewReport(m, nil)
	if v := r.ClassIoU(1); v == nil || *v != 0.5 {
		t.Errorf("class 1: %v, want 0.5", v)
	}
	if r.ClassIoU(2) != nil || r.ClassIoU(3) != nil || r.ClassIoU(-1) != nil || (Report{}).ClassIoU(1) != nil {
		t.Error("an absent or unscored class has an IoU")
	}
}
