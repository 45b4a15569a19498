package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
)

// TestActionMetrics: action and action_failed events count by result and
// time every call; both results exist from the start.
func TestActionMetrics(t *testing.T) {
	m := New("llama", func() api.Status { return api.Status{} })
	const zero = `
# HELP gpuguard_actions_total Server actions (a profile's enter and leave calls) by result: ok (a 2xx), failed (non-2xx, timeout, refused).
# TYPE gpuguard_actions_total counter
gpuguard_actions_total{name="llama",result="failed"} 0
gpuguard_actions_total{name="llama",result="ok"} 0
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(zero), "gpuguard_actions_total"); err != nil {
		t.Fatal(err)
	}
	m.Observe(api.Event{Event: api.EventAction, Path: "/sleep", Seconds: 0.3})
	m.Observe(api.Event{Event: api.EventAction, Path: "/wake_up", Seconds: 2})
	m.Observe(api.Event{Event: api.EventActionFailed, Path: "/sleep", Seconds: 60})
	if got := testutil.ToFloat64(m.actions.WithLabelValues(ActionOK)); got != 2 {
		t.Errorf("ok = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.actions.WithLabelValues(ActionFailed)); got != 1 {
		t.Errorf("failed = %v, want 1", got)
	}
	if n := testutil.CollectAndCount(m.actionSeconds); n != 1 {
		t.Fatalf("duration series = %d", n)
	}
	const hist = `
# HELP gpuguard_action_duration_seconds How long server actions took, failed ones included.
# TYPE gpuguard_action_duration_seconds histogram
gpuguard_action_duration_seconds_bucket{name="llama",le="0.001"} 0
gpuguard_action_duration_seconds_bucket{name="llama",le="0.01"} 0
gpuguard_action_duration_seconds_bucket{name="llama",le="0.05"} 0
gpuguard_action_duration_seconds_bucket{name="llama",le="0.1"} 0
gpuguard_action_duration_seconds_bucket{name="llama",le="0.25"} 0
gpuguard_action_duration_seconds_bucket{name="llama",le="0.5"} 1
gpuguard_action_duration_seconds_bucket{name="llama",le="1"} 1
gpuguard_action_duration_seconds_bucket{name="llama",le="2.5"} 2
gpuguard_action_duration_seconds_bucket{name="llama",le="5"} 2
gpuguard_action_duration_seconds_bucket{name="llama",le="10"} 2
gpuguard_action_duration_seconds_bucket{name="llama",le="30"} 2
gpuguard_action_duration_seconds_bucket{name="llama",le="60"} 3
gpuguard_action_duration_seconds_bucket{name="llama",le="120"} 3
gpuguard_action_duration_seconds_bucket{name="llama",le="+Inf"} 3
gpuguard_action_duration_seconds_sum{name="llama"} 62.3
gpuguard_action_duration_seconds_count{name="llama"} 3
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(hist), "gpuguard_action_duration_seconds"); err != nil {
		t.Fatal(err)
	}
}
