//go:build !(linux && cgo)

package memlimit

// capArenas: only glibc has per-thread malloc arenas to cap.
func capArenas(int) bool { return false }
