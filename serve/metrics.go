package serve

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the series /metrics reports, in a registry of the server's
// own (two servers in one process do not collide).
type metrics struct {
	registry *prometheus.Registry
	requests *prometheus.CounterVec // by HTTP status, answers the client got
	lost     *prometheus.CounterVec // by HTTP status, answers the client did not get
	latency  prometheus.Histogram   // seconds per /v1/segment request
	batches  prometheus.Histogram   // images per model run
	inFlight prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "segtune_requests_total", Help: "Segment requests answered, by HTTP status."}, []string{"code"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "segtune_answers_lost_total", Help: "Segment answers that did not reach the client (it left or stopped reading), by the HTTP status they had."}, []string{"code"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "segtune_request_duration_seconds", Help: "Time from a segment request's arrival to its answer.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}}),
		batches: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "segtune_batch_size", Help: "Images per model run.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64}}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "segtune_requests_in_flight", Help: "Segment requests being handled."}),
	}
	m.registry.MustRegister(m.requests, m.lost, m.latency, m.batches, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) begin() { m.inFlight.Inc() }

// end counts a request by its status, as answered or, when the answer
// did not reach the client, as lost.
func (m *metrics) end(status int, d time.Duration, delivered bool) {
	m.inFlight.Dec()
	if delivered {
		m.requests.WithLabelValues(strconv.Itoa(status)).Inc()
	} else {
		m.lost.WithLabelValues(strconv.Itoa(status)).Inc()
	}
	m.latency.Observe(d.Seconds())
}

func (m *metrics) batch(n int) { m.batches.Observe(float64(n)) }

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}
