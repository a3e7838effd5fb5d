//go:build mpi

package mpi

/*
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

static int seg_init(int *rank, int *size, int *local, int *localRank, int *provided) {
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_rank(MPI_COMM_WORLD, rank);
	MPI_Comm_size(MPI_COMM_WORLD, size);
	MPI_Comm node;
	rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Comm_size(node, local);
	MPI_Comm_rank(node, localRank);
	return MPI_Comm_free(&node);
}

// Counts are ints in MPI: long buffers go in chunks.
#define SEG_CHUNK (1 << 28)

static int seg_allreduce(void *buf, long n, int f64) {
	MPI_Datatype t = f64 ? MPI_DOUBLE : MPI_FLOAT;
	size_t el = f64 ? 8 : 4;
	for (long off = 0; off < n; off += SEG_CHUNK) {
		long c = n - off < SEG_CHUNK ? n - off : SEG_CHUNK;
		int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * el, (int)c, t, MPI_SUM, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) return rc;
	}
	return MPI_SUCCESS;
}

static int seg_bcast(void *buf, long n, int root) {
	for (long off = 0; off < n; off += SEG_CHUNK) {
		long c = n - off < SEG_CHUNK ? n - off : SEG_CHUNK;
		int rc = MPI_Bcast((char *)buf + off, (int)c, MPI_BYTE, root, MPI_COMM_WORLD);
		if (rc != MPI_SUCCESS) return rc;
	}
	return MPI_SUCCESS;
}

// A non-blocking allgather whose buffers and request live in C memory,
// polled from Go.
typedef struct {
	MPI_Request req;
	unsigned long long *in, *out;
} seg_gather;

static seg_gather *seg_gather_start(const unsigned long long *in, int n, int size, int *rc) {
	seg_gather *g = calloc(1, sizeof *g);
	g->in = malloc(sizeof(unsigned long long) * (size_t)n);
	g->out = malloc(sizeof(unsigned long long) * (size_t)n * (size_t)size);
	memcpy(g->in, in, sizeof(unsigned long long) * (size_t)n);
	*rc = MPI_Iallgather(g->in, n, MPI_UNSIGNED_LONG_LONG, g->out, n, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD, &g->req);
	return g;
}

static int seg_gather_test(seg_gather *g, int *done) {
	return MPI_Test(&g->req, done, MPI_STATUS_IGNORE);
}

static void seg_gather_free(seg_gather *g, unsigned long long *out, long n) {
	if (out) memcpy(out, g->out, sizeof(unsigned long long) * (size_t)n);
	free(g->in);
	free(g->out);
	free(g);
}

static void seg_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static int seg_error_string(int rc, char *buf) {
	int n = 0;
	MPI_Error_string(rc, buf, &n);
	return n;
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"
)

// Built says whether this binary was built with MPI (-tags mpi).
const Built = true

// Init joins the world of ranks that a launcher started (MPI_Init_thread
// with MPI_THREAD_SERIALIZED) and returns it; without a launcher it
// returns this process alone and MPI is not initialised. The calling
// goroutine stays on its OS thread, which must also call Finalize (MPI's
// main thread).
func Init() (*Comm, error) {
	l := Detect()
	if l.Launcher == "" {
		return Single(), nil
	}
	runtime.LockOSThread()
	var rank, size, local, localRank, provided C.int
	if rc := C.seg_init(&rank, &size, &local, &localRank, &provided); rc != C.MPI_SUCCESS {
		return nil, fmt.Errorf("MPI_Init_thread: %s", errorString(rc))
	}
	t := &mpiWorld{r: int(rank), n: int(size)}
	c := &Comm{t: t, localSize: int(local), localRank: int(localRank), launcher: l.Launcher}
	if provided < C.MPI_THREAD_SERIALIZED {
		return c, fmt.Errorf("the MPI library offers thread level %d, below MPI_THREAD_SERIALIZED (%d), which segtune needs", provided, C.MPI_THREAD_SERIALIZED)
	}
	// srun without --mpi starts its tasks with no way to find each other:
	// each would initialise as a world of one and train alone.
	if l.Size > 1 && int(size) != l.Size {
		return c, fmt.Errorf("%s started %d processes but MPI joined them into worlds of %d: give srun --mpi=pmix (or pmi2; `srun --mpi=list` shows them), or launch with mpirun",
			l.Launcher, l.Size, size)
	}
	return c, nil
}

// mpiWorld is MPI_COMM_WORLD.
type mpiWorld struct {
	mu   sync.Mutex // MPI_THREAD_SERIALIZED: one call at a time
	r, n int
	done bool
}

func (w *mpiWorld) rank() int { return w.r }
func (w *mpiWorld) size() int { return w.n }

func errorString(rc C.int) string {
	buf := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING + 1))
	defer C.free(unsafe.Pointer(buf))
	n := C.seg_error_string(rc, buf)
	return C.GoStringN(buf, n) + " (MPI error " + strconv.Itoa(int(rc)) + ")"
}

func (w *mpiWorld) call(what string, f func() C.int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return fmt.Errorf("mpi: %s after Finalize", what)
	}
	if rc := f(); rc != C.MPI_SUCCESS {
		return fmt.Errorf("%s: %s", what, errorString(rc))
	}
	return nil
}

func (w *mpiWorld) allreduceF32(buf []float32) error {
	if len(buf) == 0 {
		return nil
	}
	return w.call("MPI_Allreduce", func() C.int {
		return C.seg_allreduce(unsafe.Pointer(&buf[0]), C.long(len(buf)), 0)
	})
}

func (w *mpiWorld) allreduceF64(buf []float64) error {
	if len(buf) == 0 {
		return nil
	}
	return w.call("MPI_Allreduce", func() C.int {
		return C.seg_allreduce(unsafe.Pointer(&buf[0]), C.long(len(buf)), 1)
	})
}

func (w *mpiWorld) bcast(buf []byte, root int) error {
	if len(buf) == 0 {
		return nil
	}
	return w.call("MPI_Bcast", func() C.int {
		return C.seg_bcast(unsafe.Pointer(&buf[0]), C.long(len(buf)), C.int(root))
	})
}

func (w *mpiWorld) allgatherU64(in []uint64) ([]uint64, error) {
	out := make([]uint64, len(in)*w.n)
	if len(in) == 0 {
		return out, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil, fmt.Errorf("mpi: MPI_Iallgather after Finalize")
	}
	var rc C.int
	g := C.seg_gather_start((*C.ulonglong)(unsafe.Pointer(&in[0])), C.int(len(in)), C.int(w.n), &rc)
	if rc != C.MPI_SUCCESS {
		C.seg_gather_free(g, nil, 0)
		return nil, fmt.Errorf("MPI_Iallgather: %s", errorString(rc))
	}
	err := pollBackoff(func() (bool, error) {
		var done C.int
		if rc := C.seg_gather_test(g, &done); rc != C.MPI_SUCCESS {
			return false, fmt.Errorf("MPI_Test: %s", errorString(rc))
		}
		return done != 0, nil
	})
	if err != nil {
		// The request is still live in MPI: leak it rather than free
		// memory MPI may write; the job ends on this error anyway.
		return nil, err
	}
	C.seg_gather_free(g, (*C.ulonglong)(unsafe.Pointer(&out[0])), C.long(len(out)))
	return out, nil
}

func (w *mpiWorld) abort(code int) {
	// Flush what this rank printed before MPI kills the job, and give the
	// launcher a moment to forward it: Open MPI reads the ranks' output
	// pipes asynchronously and drops what it has not read when the job is
	// killed (a loaded machine lost a rank's last line so).
	os.Stdout.Sync()
	os.Stderr.Sync()
	time.Sleep(abortGrace)
	C.seg_abort(C.int(code))
}

// abortGrace is how long a rank waits between its last words and
// MPI_Abort.
const abortGrace = 500 * time.Millisecond

func (w *mpiWorld) finalize() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return nil
	}
	w.done = true
	defer runtime.UnlockOSThread()
	if rc := C.MPI_Finalize(); rc != C.MPI_SUCCESS {
		return fmt.Errorf("MPI_Finalize: %s", errorString(rc))
	}
	return nil
}

// pollBackoff is how a rank waits for a slow collective: it checks at
// once, then sleeps from 50 µs up to 20 ms between checks.
func pollBackoff(done func() (bool, error)) error {
	wait := 50 * time.Microsecond
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		time.Sleep(wait)
		if wait < 20*time.Millisecond {
			wait *= 2
		}
	}
}
