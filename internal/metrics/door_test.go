package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
)

// TestServeSeries: the front door's series exist only with a front door,
// and count what the door reports.
func TestServeSeries(t *testing.T) {
	st := api.Status{Ready: true, Held: 3}
	m := New("llama", func() api.Status { return st })
	m.ServeRequest(200) // before EnableServe: nothing to count into
	if n, err := testutil.GatherAndCount(m.Gatherer(), "gpuguard_serve_requests_total", "gpuguard_child_ready"); err != nil || n != 0 {
		t.Fatalf("serve series without a front door: %d %v", n, err)
	}
	m.EnableServe()
	m.ServeRequest(200)
	m.ServeRequest(200)
	m.ServeRequest(503)
	m.ServeRejected("hold")
	m.ServeRetry()
	m.ServeHold(1500 * time.Millisecond)
	want := `
# HELP gpuguard_child_ready 1 while the child answers its health check and no planned restart has begun, else 0.
# TYPE gpuguard_child_ready gauge
gpuguard_child_ready{name="llama"} 1
# HELP gpuguard_serve_held Requests held at the front door now: waiting for a ready child, or being deferred.
# TYPE gpuguard_serve_held gauge
gpuguard_serve_held{name="llama"} 3
# HELP gpuguard_serve_rejected_total Requests the front door answered 503 itself: hold (the child was not ready within hold), full (max_held were held).
# TYPE gpuguard_serve_rejected_total counter
gpuguard_serve_rejected_total{name="llama",reason="full"} 0
gpuguard_serve_rejected_total{name="llama",reason="hold"} 1
# HELP gpuguard_serve_requests_total Requests answered through the front door, by HTTP status (the child's, or the door's own 503 and 502).
# TYPE gpuguard_serve_requests_total counter
gpuguard_serve_requests_total{code="200",name="llama"} 2
gpuguard_serve_requests_total{code="503",name="llama"} 1
# HELP gpuguard_serve_retries_total Requests sent to the child a second time because its connection failed before any response byte.
# TYPE gpuguard_serve_retries_total counter
gpuguard_serve_retries_total{name="llama"} 1
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "gpuguard_child_ready", "gpuguard_serve_held",
		"gpuguard_serve_rejected_total", "gpuguard_serve_requests_total", "gpuguard_serve_retries_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(m.Gatherer(), "gpuguard_serve_hold_seconds"); err != nil || n != 1 {
		t.Fatalf("hold histogram: %d %v", n, err)
	}
	if problems, err := testutil.GatherAndLint(m.Gatherer(), "gpuguard_serve_hold_seconds", "gpuguard_serve_requests_total"); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	st.Ready = false
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(`
# HELP gpuguard_child_ready 1 while the child answers its health check and no planned restart has begun, else 0.
# TYPE gpuguard_child_ready gauge
gpuguard_child_ready{name="llama"} 0
`), "gpuguard_child_ready"); err != nil {
		t.Fatal(err)
	}
}
