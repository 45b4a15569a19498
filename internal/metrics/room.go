package metrics

import "github.com/prometheus/client_golang/prometheus"

// roomBuckets span a peer that sleeps at once (a tenth of a second) to
// waits for a peer's keep_awake (the default is a minute) up to the
// default hold (two minutes) and beyond.
var roomBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// newRoomSeconds is gpuguard_room_seconds: how long this instance waited
// for room, from its ask to its GPU's tenants until it fitted (each room
// event's seconds).
func newRoomSeconds(cl prometheus.Labels) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "room_seconds", ConstLabels: cl,
		Help:    "Waits for room on a shared GPU: from the ask that idle peers sleep to the fit.",
		Buckets: roomBuckets,
	})
}
