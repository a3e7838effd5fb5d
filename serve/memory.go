package serve

import (
	"context"
	"errors"
	"fmt"
	"image"
	"net/http"

	"golang.org/x/sync/semaphore"

	"github.com/segtune/segtune/imageio"
	"github.com/segtune/segtune/inference/pipeline"
	"github.com/segtune/segtune/internal/memlimit"
	"github.com/segtune/segtune/internal/setting"
)

// budget is memory that requests hold together, charged before the work
// that allocates it, so that concurrent requests each within the limits
// cannot together take the process past its memory limit.
type budget struct {
	sem  *semaphore.Weighted
	size int64
	from string // what size is, for messages
}

func newBudget(size int64, from string) *budget {
	return &budget{sem: semaphore.NewWeighted(size), size: size, from: from}
}

// Shares of the memory limit (internal/memlimit) that serve's budgets
// default to: the rest is the model's session, ONNX Runtime's arenas and
// the Go runtime's.
const (
	workShare = 2 // 1/2: decoded images, tensors, model runs and answers
	bodyShare = 8 // 1/8: request bodies being received or held
)

// defaultBudgets are the work and body budgets Options leave at 0.
func defaultBudgets(o Options) (work, body int64, workFrom, bodyFrom string) {
	limit, advice := memlimit.Limit()
	from := advice.String() // a client cannot set it: named by key
	work, body = o.MaxMemory, o.BodyMemory
	workFrom, bodyFrom = "MaxMemory", "BodyMemory"
	if work <= 0 {
		work = max(limit/workShare, 1)
		workFrom = fmt.Sprintf("half the memory limit of %s (%s)", memlimit.Human(limit), from)
	}
	if body <= 0 {
		body = max(limit/bodyShare, o.MaxBodyBytes)
		bodyFrom = fmt.Sprintf("an eighth of the memory limit of %s (%s), at least the largest body", memlimit.Human(limit), from)
	}
	return work, body, workFrom, bodyFrom
}

// requestBytes estimates, from an image's header alone, the memory one
// request takes until it is answered: decoding (imageio.DecodedBytes:
// the pixels, an RGBA view and a float tensor at the image's size), the
// model run at the preprocessed size (the estimate segment checks before
// batching, Segmenter.RunEstimate) and the answer (a label per pixel, an
// RGBA overlay, the PNG). It returns the preprocessed shape for messages.
func (s *Server) requestBytes(cfg image.Config, format, answer string) (int64, pipeline.Shape, error) {
	g, err := s.seg.Pre.Geometry(cfg.Width, cfg.Height)
	if err != nil {
		return 0, pipeline.Shape{}, err
	}
	shape := pipeline.Shape{imageio.Channels, g.Height, g.Width}
	perPixel := int64(1 + 1) // labels, and the PNG at most their size
	if answer == formatOverlay {
		perPixel += 4 + 4 // the RGBA overlay, and its PNG
	}
	need := satAdd(imageio.DecodedBytes(cfg, format), s.seg.RunEstimate(1, shape))
	return satAdd(need, memlimit.Product(int64(cfg.Width), int64(cfg.Height), perPixel)), shape, nil
}

func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// reserve charges need bytes to the work budget for a request's image,
// waiting (FIFO) until ctx is done for earlier requests to release
// theirs. An image that alone needs more than the budget is refused with
// 413 and the estimate; one that waited too long with 503.
func (s *Server) reserve(ctx context.Context, need int64, what string) (release func(), herr *httpError) {
	if need > s.work.size {
		err := &memlimit.TooLargeError{What: what, Need: need, Limit: s.work.size, From: setting.Advice(s.work.from),
			Fix: "send a smaller image"}
		return nil, fail(http.StatusRequestEntityTooLarge, "%v", err)
	}
	if err := s.work.sem.Acquire(ctx, need); err != nil {
		if errors.Is(context.Cause(ctx), errAnswerDeadline) {
			return nil, fail(http.StatusServiceUnavailable, "the server is busy: no memory for this image (%s) was free within the write timeout; retry", memlimit.Human(need))
		}
		return nil, fail(http.StatusServiceUnavailable, "the request was abandoned while it waited for memory: %v", context.Cause(ctx))
	}
	return func() { s.work.sem.Release(need) }, nil
}
