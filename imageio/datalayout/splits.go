package datalayout

// OpenSplits opens every split of the data folder root that a
// whole-data-set job goes through: opt.Split alone when it is set, else
// each split root's layout has, else its one set of pairs. Nothing is
// returned until every split is open.
func OpenSplits(root string, opt Options) ([]*Set, error) {
	_, splits, err := Splits(root, opt)
	if err != nil {
		return nil, err
	}
	if opt.Split != "" || len(splits) == 0 {
		splits = []string{opt.Split}
	}
	sets := make([]*Set, 0, len(splits))
	for _, split := range splits {
		o := opt
		o.Split = split
		set, err := Open(root, o)
		if err != nil {
			return nil, err
		}
		sets = append(sets, set)
	}
	return sets, nil
}
