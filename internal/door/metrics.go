package door

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// unknownModel is the model label of a request that names no model some
// instance declares: a client cannot add series.
const unknownModel = "unknown"

// Metrics are the door's series, on a registry of its own.
type Metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	codes    [600]string // status code labels, made once
}

// NewMetrics registers the door's series; instances reports how many
// instances the door routes to now, at each scrape.
func NewMetrics(instances func() int) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpuguard_door_requests_total",
			Help: "Requests answered by gpuguard door, by the model named (a declared name, else unknown) and status code.",
		}, []string{"model", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpuguard_door_request_duration_seconds",
			Help:    "Time from a request's arrival to its response's first byte, by the model named (a declared name, else unknown).",
			Buckets: []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120},
		}, []string{"model"}),
	}
	for c := range m.codes {
		m.codes[c] = strconv.Itoa(c)
	}
	m.reg.MustRegister(m.requests, m.duration,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpuguard_door_instances",
			Help: "Instances with a front door that gpuguard door routes to now.",
		}, func() float64 { return float64(instances()) }),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	return m
}

// observe counts one answered request: model is a declared name or
// unknownModel, firstByte the time to its first byte (0: none was sent).
func (m *Metrics) observe(model string, code int, firstByte time.Duration) {
	label := strconv.Itoa(code)
	if code >= 0 && code < len(m.codes) {
		label = m.codes[code]
	}
	m.requests.WithLabelValues(model, label).Inc()
	if firstByte > 0 {
		m.duration.WithLabelValues(model).Observe(firstByte.Seconds())
	}
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
}

// Gatherer is the registry, for tests.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }
