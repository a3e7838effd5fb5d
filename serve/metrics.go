package serve

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"
)

// metrics holds the counters /metrics reports, written in Prometheus'
// text exposition format (version 0.0.4) by hand: five series do not
// justify client_golang's dependency tree (protobuf, procfs, …).
type metrics struct {
	mu        sync.Mutex
	requests  map[int]uint64 // by HTTP status
	latency   histogram      // seconds per /v1/segment request
	batches   histogram      // images per model run
	inFlight  int
	startTime time.Time
}

// histogram is a cumulative Prometheus histogram over fixed bounds.
type histogram struct {
	bounds []float64
	counts []uint64 // per bound, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

func newHistogram(bounds ...float64) histogram {
	return histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v
	h.counts[i]++
	h.sum += v
	h.n++
}

func (h *histogram) write(w io.Writer, name, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=%q} %d\n", name, strconv.FormatFloat(b, 'g', -1, 64), cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, h.n, name, strconv.FormatFloat(h.sum, 'g', -1, 64), name, h.n)
}

func newMetrics() *metrics {
	return &metrics{
		requests:  map[int]uint64{},
		latency:   newHistogram(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
		batches:   newHistogram(1, 2, 4, 8, 16, 32, 64),
		startTime: time.Now(),
	}
}

func (m *metrics) begin() {
	m.mu.Lock()
	m.inFlight++
	m.mu.Unlock()
}

func (m *metrics) end(status int, d time.Duration) {
	m.mu.Lock()
	m.inFlight--
	m.requests[status]++
	m.latency.observe(d.Seconds())
	m.mu.Unlock()
}

func (m *metrics) batch(n int) {
	m.mu.Lock()
	m.batches.observe(float64(n))
	m.mu.Unlock()
}

func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintf(w, "# HELP segtune_requests_total Segment requests answered, by HTTP status.\n# TYPE segtune_requests_total counter\n")
	codes := make([]int, 0, len(m.requests))
	for c := range m.requests {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for _, c := range codes {
		fmt.Fprintf(w, "segtune_requests_total{code=\"%d\"} %d\n", c, m.requests[c])
	}
	fmt.Fprintf(w, "# HELP segtune_requests_in_flight Segment requests being handled.\n# TYPE segtune_requests_in_flight gauge\nsegtune_requests_in_flight %d\n", m.inFlight)
	m.latency.write(w, "segtune_request_duration_seconds", "Time from a segment request's arrival to its answer.")
	m.batches.write(w, "segtune_batch_size", "Images per model run.")
	fmt.Fprintf(w, "# HELP segtune_start_time_seconds When the server started, in Unix seconds.\n# TYPE segtune_start_time_seconds gauge\nsegtune_start_time_seconds %d\n", m.startTime.Unix())
}
