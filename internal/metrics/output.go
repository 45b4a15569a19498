package metrics

import "github.com/prometheus/client_golang/prometheus"

// CountOutputLosses exposes how many of gpuguard's own writes to its
// stdout or stderr were dropped because nothing reads them any more (a
// closed pipe, a dead `tee`) as gpuguard_output_dropped_total. dropped is
// read at scrape time.
func (m *Metrics) CountOutputLosses(dropped func() uint64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace, Name: "output_dropped_total",
		ConstLabels: m.constLabels,
		Help:        "gpuguard's own output lines dropped because their reader was gone.",
	}, func() float64 { return float64(dropped()) }))
}
