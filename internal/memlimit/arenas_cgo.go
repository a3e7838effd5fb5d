//go:build linux && cgo

package memlimit

/*
#include <stdlib.h>
#include <malloc.h>

// segtune_cap_arenas returns 1 when glibc took the cap (mallopt's success).
static int segtune_cap_arenas(int n) {
#ifdef __GLIBC__
	return mallopt(M_ARENA_MAX, n);
#else
	return 0;
#endif
}
*/
import "C"

// capArenas caps glibc's malloc arenas at n; false where it cannot (musl).
func capArenas(n int) bool { return C.segtune_cap_arenas(C.int(n)) == 1 }
