package data

import (
	"strings"
	"testing"

	"github.com/segtune/segtune/imageio/datalayout"
)

// The text form names each unmatched and bad file, and gives each class
// its counts and size quantiles ("-" for a class in no image); Bad counts
// the files named over every split.
func TestReportsWriteText(t *testing.T) {
	rs := Reports{
		{Root: "d", Format: "folders", Pairs: 2, Unmatched: []datalayout.Unmatched{{Path: "images/x.jpg", Why: "no mask"}},
			Problems: []FileProblem{{Path: "m.png", Error: "m.png: 3x3 mask for a 4x4 image"}}, NumClasses: 2, Ignore: 255,
			Classes: []ClassReport{{Class: 0, Name: "bg", Pixels: 30, Images: 2, Size: &SizeSpread{0.5, 0.5, 0.75, 1, 1}}, {Class: 1, Name: "cat"}}},
		{Root: "d", Format: "voc", Split: "val", Unmatched: []datalayout.Unmatched{}, Problems: []FileProblem{}},
	}
	var b strings.Builder
	rs.WriteText(&b)
	want := "d (folders layout): 2 good pairs, 1 unmatched files, 1 bad files\n" +
		"  unmatched  images/x.jpg: no mask\n" +
		"  bad        m.png: 3x3 mask for a 4x4 image\n" +
		"  2 classes (label 255 ignored); object size = the class's share of an image's labelled pixels\n" +
		"  class  name                 pixels  images   size min/p10/median/p90/max\n" +
		"      0  bg                       30       2  0.500/0.500/0.750/1.000/1.000\n" +
		"      1  cat                       0       0                             -\n" +
		"d (voc layout, split val): 0 good pairs, 0 unmatched files, 0 bad files\n"
	if got := b.String(); got != want {
		t.Errorf("text:\n%s\nwant:\n%s", got, want)
	}
	if rs.Bad() != 2 {
		t.Errorf("Bad %d, want 2", rs.Bad())
	}
}

// A data check names the classes as the user does, else as a CVAT
// labelmap or the annotation format does, unless a label map renumbers
// the labels those names are of.
func TestReportNames(t *testing.T) {
	sets := []*datalayout.Set{{Classes: []string{"coco"}}}
	for _, c := range []struct {
		given, labelmap []string
		mapped          bool
		want            string
	}{
		{[]string{"user"}, []string{"cvat"}, true, "user"},
		{nil, []string{"cvat"}, true, ""},
		{nil, []string{"cvat"}, false, "cvat"},
		{nil, nil, false, "coco"},
	} {
		got := ReportNames(c.given, c.labelmap, c.mapped, sets)
		if strings.Join(got, ",") != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}
