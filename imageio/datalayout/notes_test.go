package datalayout

import (
	"slices"
	"strings"
	"testing"
)

// A set's notes name its classes and, until the user gives a label map,
// the preset its masks usually need, by the caller's name for the setting.
func TestSetNotes(t *testing.T) {
	s := &Set{Root: "d", Format: "cityscapes", LabelPreset: "cityscapes", Classes: []string{"road", "car"}}
	flag := func(key string) string { return "--" + strings.ReplaceAll(key, "_", "-") }
	notes := s.Notes(false, flag)
	want := []string{s.Summary(), "cityscapes classes, label 0 up: road,car", "note: cityscapes masks usually need --label-map cityscapes"}
	if !slices.Equal(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	if notes := s.Notes(true, flag); len(notes) != 2 {
		t.Errorf("with a label map given: %q", notes)
	}
}
