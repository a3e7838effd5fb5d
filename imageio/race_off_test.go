//go:build !race

package imageio

const raceEnabled = false
