package main

import "github.com/segtune/segtune/internal/stats"

// pairedDiff returns the paired difference arm − base over the seeds both
// have (keys of the maps), in seed order.
func pairedDiff(arm, base map[int]float64) stats.Interval {
	var d []float64
	for _, s := range sortedSeeds(arm) {
		if b, ok := base[s]; ok {
			d = append(d, arm[s]-b)
		}
	}
	return stats.TInterval(d)
}
