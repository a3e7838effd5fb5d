package imageio

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a size written "HxW" (height by width), or a single N
// for N×N, as users give it: both sides positive integers.
func ParseSize(v string) (h, w int, err error) {
	hs, ws, found := strings.Cut(strings.ToLower(v), "x")
	if !found {
		ws = hs
	}
	h, err1 := strconv.Atoi(strings.TrimSpace(hs))
	w, err2 := strconv.Atoi(strings.TrimSpace(ws))
	if err1 != nil || err2 != nil || h <= 0 || w <= 0 {
		return 0, 0, fmt.Errorf("size %q: want HxW with positive integers, e.g. 513x513", v)
	}
	return h, w, nil
}
