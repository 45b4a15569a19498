package metrics

import (
	"fmt"
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
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(stepUps(0, 0, 0)), "gpuguard_stepups_total"); err != nil {
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
	if err := testutil.GatherAndCompare(m.Gatherer(), strings.NewReader(stepUps(1, 1, 2)), "gpuguard_stepups_total"); err != nil {
		t.Fatal(err)
	}
}

// stepUps is gpuguard_stepups_total of instance llama as the registry
// shows it, with the given counts per reason.
func stepUps(manual, recovered, request int) string {
	return fmt.Sprintf(`
# HELP gpuguard_stepups_total Profile step-ups by reason (recovered: below low for recover_after; manual: gpuguard step; request: a request woke a sleeping instance).
# TYPE gpuguard_stepups_total counter
gpuguard_stepups_total{name="llama",reason="manual"} %d
gpuguard_stepups_total{name="llama",reason="recovered"} %d
gpuguard_stepups_total{name="llama",reason="request"} %d
`, manual, recovered, request)
}
