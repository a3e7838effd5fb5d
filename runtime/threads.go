package runtime

import (
	goruntime "runtime"

	"github.com/segtune/segtune/internal/setting"
)

// MaxThreads bounds Options.Threads: ONNX Runtime crashes on absurd
// counts, and more than a few threads per core only slows it down.
func MaxThreads() int { return max(16, 4*goruntime.NumCPU()) }

// ThreadsRange is the valid Options.Threads: 0 (one per core) or 1 to
// MaxThreads.
func ThreadsRange() setting.Range {
	return setting.Range{Min: 1, Max: float64(MaxThreads()), Zero: true, Why: "0 picks one per core"}
}

// Validate checks o's settings before a session is made; a bad one is a
// *setting.Error keyed "threads".
func (o Options) Validate() error {
	return ThreadsRange().Check("threads", float64(o.Threads), true)
}
