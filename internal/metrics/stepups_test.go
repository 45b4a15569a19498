package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuguard/gpuguard/api"
)

// TestStepUpsByReason: every stepup event counts in
// gpuguard_stepups_total by its reason, and the contract's three reasons
// exist from the start, so that rate() sees a 0 before the first step up.
func TestStepUpsByReason(t *testing.T) {
	m := New("llama", func() api.Status { return api.Status{} })
	const zero = `
# HELP gpuguard_stepups_total Profile step-ups by reason (recovered: below low for recover_after; manual: gpuguard step; request: a request woke a sleeping instance).
# TYPE gpuguard_stepups_total counter
gpuguard_stepups_total{name="llama",reason="manual"} 0
gpuguard_stepups_total{name="llama",reason="recovered"} 0
gpuguard_stepups_total{name="llama",reason="request"} 0
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(zero), "gpuguard_stepups_total"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []api.Event{
		{Event: api.EventStepUp, Reason: api.ReasonRecovered, From: "int8", To: "fp16"},
		{Event: api.EventStepUp, Reason: api.ReasonManual},
		{Event: api.EventStepUp, Reason: api.ReasonRequest, From: "asleep", To: "awake"},
		{Event: api.EventStepUp, Reason: api.ReasonRequest},
		{Event: api.EventStepDown, Reason: api.ReasonManual}, // not a step up
	} {
		m.Observe(ev)
	}
	const want = `
# HELP gpuguard_stepups_total Profile step-ups by reason (recovered: below low for recover_after; manual: gpuguard step; request: a request woke a sleeping instance).
# TYPE gpuguard_stepups_total counter
gpuguard_stepups_total{name="llama",reason="manual"} 1
gpuguard_stepups_total{name="llama",reason="recovered"} 1
gpuguard_stepups_total{name="llama",reason="request"} 2
`
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(want), "gpuguard_stepups_total"); err != nil {
		t.Fatal(err)
	}
}
