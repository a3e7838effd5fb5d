// Package listflag splits comma-separated list flags (segtune's
// --keep-float, the experiment commands' lists).
package listflag

import "strings"

// Split returns the comma-separated fields of s, trimmed, empty ones
// dropped: "1, 3,,10" is [1 3 10], "" is none.
func Split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
