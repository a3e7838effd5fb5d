//go:build race

package imageio

// raceEnabled: the race detector makes sync.Pool drop items at random, so
// allocation counts are meaningless.
const raceEnabled = true
