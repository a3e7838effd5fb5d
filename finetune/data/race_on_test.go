//go:build race

package data

// raceEnabled: the race detector slows PNG decoding about 15-fold.
const raceEnabled = true
