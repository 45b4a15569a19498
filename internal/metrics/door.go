package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// holdBuckets span a request let through at once by a restart's end (1ms)
// to one that waited out a long load (the default hold is 120 s).
var holdBuckets = []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// rejectReasons are gpuguard_serve_rejected_total's reasons.
var rejectReasons = []string{"hold", "full"}

// serveMetrics are the front door's series, registered by EnableServe.
type serveMetrics struct {
	requests *prometheus.CounterVec
	hold     prometheus.Histogram
	retries  prometheus.Counter
	rejected *prometheus.CounterVec
}

// EnableServe registers the front door's series ([serve] listen is set):
// gpuguard_serve_requests_total{code}, gpuguard_serve_held,
// gpuguard_serve_hold_seconds, gpuguard_serve_retries_total,
// gpuguard_serve_rejected_total{reason} and gpuguard_child_ready. Without
// it the Serve* methods count nothing and none of these series exist.
// Call it once, before the first scrape.
func (m *Metrics) EnableServe() {
	cl := m.constLabels
	s := &serveMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "serve_requests_total", ConstLabels: cl,
			Help: "Requests answered through the front door, by HTTP status (the child's, or the door's own 503 and 502).",
		}, []string{"code"}),
		hold: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "serve_hold_seconds", ConstLabels: cl,
			Help:    "How long requests that found the child not ready waited at the front door.",
			Buckets: holdBuckets,
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "serve_retries_total", ConstLabels: cl,
			Help: "Requests sent to the child a second time because its connection failed before any response byte.",
		}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "serve_rejected_total", ConstLabels: cl,
			Help: "Requests the front door answered 503 itself: hold (the child was not ready within hold), full (max_held were held).",
		}, []string{"reason"}),
	}
	for _, r := range rejectReasons {
		s.rejected.WithLabelValues(r)
	}
	snap := m.snapshot
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "serve_held", ConstLabels: cl,
		Help: "Requests held at the front door now: waiting for a ready child, or being deferred.",
	}, func() float64 { return float64(snap().Held) })
	ready := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: namespace, Name: "child_ready", ConstLabels: cl,
		Help: "1 while the child answers its health check and no planned restart has begun, else 0.",
	}, func() float64 {
		if snap().Ready {
			return 1
		}
		return 0
	})
	m.reg.MustRegister(s.requests, s.hold, s.retries, s.rejected, held, ready)
	m.serve.Store(s)
}

// ServeRequest counts one answered request.
func (m *Metrics) ServeRequest(code int) {
	if s := m.serve.Load(); s != nil {
		s.requests.WithLabelValues(strconv.Itoa(code)).Inc()
	}
}

// ServeHold records the wait of a held request.
func (m *Metrics) ServeHold(d time.Duration) {
	if s := m.serve.Load(); s != nil {
		s.hold.Observe(d.Seconds())
	}
}

// ServeRetry counts a request sent again.
func (m *Metrics) ServeRetry() {
	if s := m.serve.Load(); s != nil {
		s.retries.Inc()
	}
}

// ServeRejected counts a 503 of the door's own.
func (m *Metrics) ServeRejected(reason string) {
	if s := m.serve.Load(); s != nil {
		s.rejected.WithLabelValues(reason).Inc()
	}
}
