package sense

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

// TestProbeHealthThrottlesAndCounts: the first failure of a run is
// journaled, the same one again within a minute is not, and the line a
// minute later counts the failures it stands for; a new failure is told
// at once; recovery says how long the run lasted.
func TestProbeHealthThrottlesAndCounts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var h Health
	if d, ok := h.failed(t0, t0, "boom", true); !ok || d != "boom" {
		t.Fatalf("first failure: %q %v, want boom told", d, ok)
	}
	if !h.Down() {
		t.Fatal("not down after a failure")
	}
	for i := 1; i <= 3; i++ {
		if _, ok := h.failed(t0.Add(time.Duration(i)*time.Second), t0, "boom", true); ok {
			t.Fatalf("repeat %d within a minute told", i)
		}
	}
	if _, ok := h.failed(t0.Add(4*time.Second), t0, "boom", false); ok {
		t.Fatal("a hung call's repeat told")
	}
	d, ok := h.failed(t0.Add(time.Minute), t0, "boom", true)
	if !ok || !strings.Contains(d, "(3 more failed probe calls since the last report)") {
		t.Fatalf("a minute on: %q %v, want 3 more counted", d, ok)
	}
	if d, ok := h.failed(t0.Add(61*time.Second), t0, "other", true); !ok || d != "other" {
		t.Fatalf("a new failure: %q %v, want other told at once", d, ok)
	}
	down, told := h.Recovered(t0.Add(90 * time.Second))
	if !told || down != 90*time.Second || h.Down() {
		t.Fatalf("recovered: %s %v down=%v, want 1m30s told and up", down, told, h.Down())
	}
	if _, told := h.Recovered(t0.Add(91 * time.Second)); told {
		t.Fatal("a second recovery told")
	}
}

// TestProbeHealthLost: lost only under on_gpu_lost = "stop", once the
// run of failures reaches lost_after, with the newest failure in its
// error.
func TestProbeHealthLost(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stop := policy.Watch{OnGPULost: policy.OnGPULostStop, LostAfter: 10 * time.Second}
	var h Health
	if h.Lost(t0.Add(time.Hour), stop) {
		t.Fatal("lost without a failure")
	}
	h.failed(t0, t0, "gone", true)
	if h.Lost(t0.Add(9*time.Second), stop) {
		t.Fatal("lost before lost_after")
	}
	if h.Lost(t0.Add(time.Hour), policy.Watch{LostAfter: stop.LostAfter}) {
		t.Fatal("lost without on_gpu_lost = \"stop\"")
	}
	if !h.Lost(t0.Add(10*time.Second), stop) || h.LostErr() == nil || !strings.Contains(h.LostErr().Error(), "gone") {
		t.Fatalf("at lost_after: lostErr %v, want one naming gone", h.LostErr())
	}
}
