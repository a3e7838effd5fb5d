package data

import (
	"context"
	"fmt"
	"io"

	"github.com/segtune/segtune/imageio/datalayout"
)

// Reports are the checks of a data set's splits, in order.
type Reports []Report

// CheckSplits checks every set (Check), one split of a data set each.
func CheckSplits(ctx context.Context, sets []*datalayout.Set, cfg Config) (Reports, error) {
	var rs Reports
	for _, set := range sets {
		r, err := Check(ctx, set, cfg)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// Bad counts the files the reports name as needing attention.
func (rs Reports) Bad() int {
	n := 0
	for i := range rs {
		n += rs[i].Bad()
	}
	return n
}

// WriteText writes each report's text form (Report.WriteText).
func (rs Reports) WriteText(w io.Writer) {
	for i := range rs {
		rs[i].WriteText(w)
	}
}

// WriteText writes the report as `segtune data check` prints it: a line
// of counts, each unmatched and bad file, and the class table with each
// class's object-size quantiles.
func (r *Report) WriteText(w io.Writer) {
	split := ""
	if r.Split != "" {
		split = ", split " + r.Split
	}
	fmt.Fprintf(w, "%s (%s layout%s): %d good pairs, %d unmatched files, %d bad files\n",
		r.Root, r.Format, split, r.Pairs, len(r.Unmatched), len(r.Problems))
	for _, u := range r.Unmatched {
		fmt.Fprintf(w, "  unmatched  %s: %s\n", u.Path, u.Why)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  bad        %s\n", p.Error)
	}
	if len(r.Classes) == 0 {
		return
	}
	fmt.Fprintf(w, "  %d classes (label %d ignored); object size = the class's share of an image's labelled pixels\n", r.NumClasses, r.Ignore)
	fmt.Fprintf(w, "  %5s  %-14s %12s %7s  %28s\n", "class", "name", "pixels", "images", "size min/p10/median/p90/max")
	for _, cc := range r.Classes {
		size := "-"
		if s := cc.Size; s != nil {
			size = fmt.Sprintf("%.3f/%.3f/%.3f/%.3f/%.3f", s.Min, s.P10, s.Median, s.P90, s.Max)
		}
		fmt.Fprintf(w, "  %5d  %-14s %12d %7d  %28s\n", cc.Class, cc.Name, cc.Pixels, cc.Images, size)
	}
}

// ReportNames are the class names a data check reports with: given (the
// user's), else, without a label map (mapped), a CVAT labelmap's names or
// else an annotation format's (COCO's categories …) where they are the
// labels; a label map renumbers the labels those names are of.
func ReportNames(given, labelmap []string, mapped bool, sets []*datalayout.Set) []string {
	switch {
	case given != nil:
		return given
	case mapped:
		return nil
	case labelmap != nil:
		return labelmap
	case len(sets) > 0:
		return sets[0].Classes
	}
	return nil
}

// CheckRequest is a data folder to check (CheckSplits) as its user gives
// it: the folder (its split, or every split), the class names the user
// gives for the report (nil: the data's own, ReportNames) and the
// classes and ignore label to check the masks against.
type CheckRequest struct {
	datalayout.Folder
	ClassNames []string
	Check      Config
}

// CheckFolder checks r's folder. Reports nil: nothing was checked, and
// err says why; else err, shown after the reports, says the folder fails:
// no pair in any split (naming the layout), or files the reports name as
// needing attention.
func CheckFolder(ctx context.Context, r CheckRequest) (Reports, error) {
	masks, labelmap, err := r.Masks()
	if err != nil {
		return nil, err
	}
	sets, err := r.OpenAll()
	if err != nil {
		return nil, err
	}
	cfg := r.Check
	cfg.LabelMap, cfg.Palette = masks.Map, masks.Palette
	cfg.ClassNames = ReportNames(r.ClassNames, labelmap, masks.Map != nil, sets)
	reports, err := CheckSplits(ctx, sets, cfg)
	if err != nil {
		return nil, err
	}
	if err := datalayout.RequirePairs(r.Data, sets); err != nil {
		return reports, err
	}
	if bad := reports.Bad(); bad > 0 {
		return reports, fmt.Errorf("data check: %d files named above need attention", bad)
	}
	return reports, nil
}
