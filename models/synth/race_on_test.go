//go:build race

package synth_test

// raceEnabled: the race detector slows generation several times over, so
// the timing bound does not apply.
const raceEnabled = true
