package progress

import "testing"

// Off a terminal (as under go test) nothing is drawn: the bars are
// silent, and a silent step bar takes updates without a bar.
func TestSilentOffATerminal(t *testing.T) {
	if Shown(false) {
		t.Skip("stderr is a terminal")
	}
	if Shown(true) {
		t.Error("quiet shows bars")
	}
	s := NewSteps(10, Shown(false))
	s.Update(0, 1, 0.5, 3, 4)
	s.Clear()
	if s.bar != nil {
		t.Error("a step bar off a terminal")
	}
	b := Items(3, "x", false)
	if err := b.Add(3); err != nil {
		t.Fatal(err)
	}
	if !b.IsFinished() {
		t.Error("a silent bar does not count")
	}
}
