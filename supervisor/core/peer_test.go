package core

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// TestPeerRules: the core's side of a shared GPU, one row per edge: a
// coordinated instance proposes its rules' verdict (judged for the GPU,
// at either end of the ladder too) and moves no timer while a proposal is
// out; the step the tenants choose it for; another tenant's step, which
// is a yield and restarts sustain.
func TestPeerRules(t *testing.T) {
	shared := func(d time.Duration, ratio float64) Sample { return Sample{Now: at(d), Ratio: ratio, Shared: true} }
	proposing := func(s Sample) Sample { s.Proposing = true; return s }
	smp := func(d time.Duration, ratio float64) Input { return Sample{Now: at(d), Ratio: ratio} }
	for _, tc := range []row{
		{"a coordinated instance proposes its verdict, at the last profile too", nil, false, []in{
			{2, shared(0, 0.93), ""},
			{2, shared(time.Second, 0.93), "propose watermark"},
			{2, shared(1100*time.Millisecond, 0.93), "propose watermark"}, // not taken: asked again, the agreement holds it
		}},
		{"nothing moves while a proposal is out", nil, false, []in{
			{0, shared(0, 0.93), ""},
			{0, proposing(shared(time.Second, 0.80)), ""}, // not seen: not a dip below high
			{0, shared(1100*time.Millisecond, 0.93), "propose watermark"},
		}},
		{"a step up is proposed at the first profile too", func(p *policy.Policy) { p.Watermark.RecoverAfter = time.Second }, false, []in{
			{0, shared(0, 0.1), ""},
			{0, shared(time.Second, 0.1), "propose recovered"},
		}},
		{"the tenants' verdict steps this instance", nil, false, []in{
			{0, Peer{Now: at(0), Reason: Predicted, Ratio: 0.85, ETA: 3}, "step stepdown to 1 (predicted)"},
		}},
		{"another tenant's step is a yield, and sustain starts again", nil, false, []in{
			{0, smp(0, 0.93), ""},
			{0, Yielded{GPU: "a", To: "b", Kind: api.KindDown, Ratio: 0.93}, "journal yield; log"},
			{0, smp(time.Second, 0.93), ""},
			{0, Yielded{GPU: "a", To: "t", Kind: api.KindDown, Self: true}, ""},
			{0, smp(2*time.Second, 0.93), ""},
			{0, smp(3*time.Second, 0.93), "step stepdown to 1 (watermark)"},
		}},
	} {
		tc.play(t)
	}
}

// TestPeerTexts: what the tenants' steps and yields say.
func TestPeerTexts(t *testing.T) {
	g := Given{Policy: testPolicy()}
	_, effs := Decide(State{}, g, Peer{Now: time.Unix(0, 0), Reason: Watermark, Ratio: 0.95})
	if s := effs[0].(Step); s.Why != "watermark 0.95 > 0.90" {
		t.Errorf("a step with no detail of the tenants': %q, want the rules' own", s.Why)
	}
	_, effs = Decide(State{}, g, Peer{Now: time.Unix(0, 0), Reason: Watermark, Why: "shared GPU a: step down", Ratio: 0.95})
	if s := effs[0].(Step); s.Why != "shared GPU a: step down" {
		t.Errorf("a step with the tenants' detail: %q", s.Why)
	}
	_, effs = Decide(State{}, g, Yielded{GPU: "a", To: "b", Kind: api.KindCritical, Ratio: 0.98})
	j := effs[0].(Journal).Event
	if j.Event != api.EventYield || j.To != "b" || j.GPU != "a" || j.Reason != api.ReasonCritical || j.Watermark != 0.98 ||
		j.Detail != "a: critical restart one profile lower by b, which ranks first on the shared GPU" {
		t.Errorf("yield event %+v", j)
	}
	if l := effs[1].(Log); l.Text != "yield: b takes the critical restart one profile lower on shared GPU a" {
		t.Errorf("yield line %q", l.Text)
	}
	_, effs = Decide(State{}, g, Sample{Now: time.Unix(0, 0), Ratio: 0.95, Shared: true})
	if len(effs) != 0 {
		t.Fatalf("a first sample proposed %+v", effs)
	}
}
