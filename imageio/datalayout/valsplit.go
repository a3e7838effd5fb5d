package datalayout

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/segtune/segtune/internal/setting"
)

// SplitShareRange is the share of the images a data split holds out as
// a user gives it (0: the command's default).
var SplitShareRange = setting.Range{Min: 0, MinOpen: true, Max: 1, Zero: true, Why: "the share of the images held out"}

// ValSplit holds out a fraction of one split's samples for validation, for
// exports that come without a split (CVAT, Label Studio, LabelMe). The
// split is a function of the sample names, the seed and the grouping
// alone: the same data always splits the same way, so a resumed or
// repeated run validates on the same images.
type ValSplit struct {
	// Fraction of the samples held out, in (0, 1); whole groups are held
	// out, so the share is the nearest the groups allow.
	Fraction float64 `json:"fraction"`
	// Seed picks which groups are held out.
	Seed uint64 `json:"seed"`
	// By groups the samples so that a group is never on both sides:
	// "image" or "" (each sample alone), "folder" (the samples of one
	// sub-folder, e.g. one video sequence) or "prefix" (the samples whose
	// names differ only in a trailing frame number, e.g. seq01_000120
	// and seq01_000121).
	By string `json:"by,omitempty"`
}

// ValSplitGroupings are the values of ValSplit.By.
var ValSplitGroupings = []string{"image", "folder", "prefix"}

// Check says what is wrong with the split's settings, before any file is
// read: a *setting.Error of val_split (the fraction) or split_by.
func (v ValSplit) Check() error {
	if !(v.Fraction > 0 && v.Fraction < 1) {
		return setting.Errorf("val_split", strconv.FormatFloat(v.Fraction, 'g', -1, 64), "the fraction of the images held out for validation must be in (0, 1)")
	}
	if v.By != "" && !slices.Contains(ValSplitGroupings, v.By) {
		return setting.Errorf("split_by", v.By, "want one of %s", strings.Join(ValSplitGroupings, ", "))
	}
	return nil
}

// Given is v where its fraction is given (fraction: the user set it),
// checked; nil without it, where a seed or grouping given alone (seed,
// by) is refused. Errors are usage errors keyed val_split, split_seed
// and split_by.
func (v ValSplit) Given(fraction, seed, by bool) (*ValSplit, error) {
	switch {
	case fraction:
		if err := v.Check(); err != nil {
			return nil, setting.Usage(err)
		}
		return &v, nil
	case seed:
		return nil, setting.Usage(setting.Messagef("{split_seed} goes with {val_split} F (the fraction to hold out for validation)"))
	case by:
		return nil, setting.Usage(setting.Messagef("{split_by} goes with {val_split} F (the fraction to hold out for validation)"))
	}
	return nil, nil
}

// Group is the group of the sample named name (a Sample.Name: slash
// separated, without extension).
func (v ValSplit) Group(name string) string {
	switch v.By {
	case "folder":
		return path.Dir(name)
	case "prefix":
		dir, base := path.Split(name)
		p := strings.TrimRight(strings.TrimRight(base, "0123456789"), "_-. ")
		if p == "" { // a name that is only a number is its own group
			p = base
		}
		return dir + p
	}
	return name
}

// Divide splits samples into those kept for training and those held out
// for validation, each in the order given. Groups are ordered by a hash of
// the seed and the group's name, and taken in that order until the held
// out samples reach the fraction (at least one group; never all of them).
func (v ValSplit) Divide(samples []Sample) (train, val []Sample, err error) {
	if err := v.Check(); err != nil {
		return nil, nil, err
	}
	size := map[string]int{}
	var groups []string
	for _, s := range samples {
		g := v.Group(s.Name)
		if size[g] == 0 {
			groups = append(groups, g)
		}
		size[g]++
	}
	by := v.By
	if by == "" {
		by = "image"
	}
	if len(groups) < 2 {
		return nil, nil, fmt.Errorf("cannot hold out a validation split by %s: %d samples in %d %s", by, len(samples), len(groups), plural(len(groups), "group"))
	}
	rank := func(g string) uint64 {
		h := fnv.New64a()
		var seed [8]byte
		binary.LittleEndian.PutUint64(seed[:], v.Seed)
		h.Write(seed[:])
		h.Write([]byte(g))
		return h.Sum64()
	}
	slices.SortFunc(groups, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	target := max(1, int(math.Round(v.Fraction*float64(len(samples)))))
	held := map[string]bool{}
	for n, i := 0, 0; n < target && i < len(groups)-1; i++ {
		held[groups[i]] = true
		n += size[groups[i]]
	}
	for _, s := range samples {
		if held[v.Group(s.Name)] {
			val = append(val, s)
		} else {
			train = append(train, s)
		}
	}
	return train, val, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
