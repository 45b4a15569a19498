package supervisor

import (
	"slices"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// TestSharedPerform: what the agreement asks of the instance is done in
// its order, a step and the alarm as inputs to the decision core, without
// a loop: a yield journaled and logged, the sustain timer restarted (a
// gap), a step told with the instance's own rules' detail when the
// tenants gave none, the alarm, and then the announcement.
func TestSharedPerform(t *testing.T) {
	fc := &fakeCoord{}
	a := newActor(fc)
	now := time.Now()
	f := actorFacts(now)
	f.wm = testPolicy().Watermark
	do := &fakeVerbs{}
	a.perform(peerOutcome{yield: &api.Event{Event: api.EventYield}, log: "yield", gap: true,
		step: &peerStep{kind: api.KindDown}, nobody: &nobodyCan{gpu: fakeGPU, shared: true},
		announce: &announcement{d: api.TenantDecision{GPU: fakeGPU, Seq: 9}, peers: []string{"/run/other.sock"}}}, f, do)
	fc.mu.Lock()
	announced := slices.Clone(fc.announced)
	fc.mu.Unlock()
	if len(announced) != 1 || announced[0].Seq != 9 {
		t.Fatalf("announced %+v, want decision 9", announced)
	}
	if want := []string{"emit " + api.EventYield, "log"}; !slices.Equal(do.ops, want) {
		t.Fatalf("ops %q, want %q", do.ops, want)
	}
	want := []core.Input{core.Gap{},
		core.Peer{Now: now, Reason: core.Watermark, Why: "watermark 0.90 > 0.90", Ratio: 0.9},
		core.PeerNobody{Now: now, Ratio: 0.9, GPU: fakeGPU, Shared: true}}
	if !slices.Equal(do.inputs, want) {
		t.Fatalf("inputs %+v, want %+v", do.inputs, want)
	}
	do.inputs = nil
	a.perform(peerOutcome{step: &peerStep{kind: api.KindCritical, why: "shared GPU x"}}, f, do)
	if want := []core.Input{core.Peer{Now: now, Reason: core.Critical, Why: "shared GPU x", Ratio: 0.9}}; !slices.Equal(do.inputs, want) {
		t.Fatalf("inputs %+v, want %+v", do.inputs, want)
	}
}
