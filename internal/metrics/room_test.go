package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
)

// TestRoomMetrics: a room event times the wait for room; a stepdown for
// a peer counts as reason room, present from the start.
func TestRoomMetrics(t *testing.T) {
	m := New("chat", func() api.Status { return api.Status{} })
	if got := testutil.ToFloat64(m.stepdowns.WithLabelValues(api.ReasonRoom)); got != 0 {
		t.Fatalf("room stepdowns at start = %v", got)
	}
	m.Observe(api.Event{Event: api.EventStepDown, Reason: api.ReasonRoom, For: "coder"})
	m.Observe(api.Event{Event: api.EventRoom, Seconds: 1.7, Slept: []string{"coder"}})
	m.Observe(api.Event{Event: api.EventNoRoom})
	if got := testutil.ToFloat64(m.stepdowns.WithLabelValues(api.ReasonRoom)); got != 1 {
		t.Errorf("room stepdowns = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.roomSeconds); n != 1 {
		t.Fatalf("room_seconds series = %d", n)
	}
	const want = `
# HELP gpuguard_room_seconds Waits for room on a shared GPU: from the ask that idle peers sleep to the fit.
# TYPE gpuguard_room_seconds histogram
gpuguard_room_seconds_bucket{name="chat",le="0.1"} 0
gpuguard_room_seconds_bucket{name="chat",le="0.25"} 0
gpuguard_room_seconds_bucket{name="chat",le="0.5"} 0
gpuguard_room_seconds_bucket{name="chat",le="1"} 0
gpuguard_room_seconds_bucket{name="chat",le="2.5"} 1
gpuguard_room_seconds_bucket{name="chat",le="5"} 1
gpuguard_room_seconds_bucket{name="chat",le="10"} 1
gpuguard_room_seconds_bucket{name="chat",le="30"} 1
gpuguard_room_seconds_bucket{name="chat",le="60"} 1
gpuguard_room_seconds_bucket{name="chat",le="120"} 1
gpuguard_room_seconds_bucket{name="chat",le="300"} 1
gpuguard_room_seconds_bucket{name="chat",le="+Inf"} 1
gpuguard_room_seconds_sum{name="chat"} 1.7
gpuguard_room_seconds_count{name="chat"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "gpuguard_room_seconds"); err != nil {
		t.Fatal(err)
	}
}
