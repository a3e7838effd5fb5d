package onnx

import (
	"cmp"
	"slices"
)

// sortedKeys returns a map's keys in ascending order, for deterministic
// output from map-based bookkeeping.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
