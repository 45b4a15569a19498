package supervisor

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
)

// The agreement as an actor on its own, without a loop: each input with
// the facts of the moment, and what it asks back.

func actorFacts(now time.Time) peerFacts {
	return peerFacts{now: now, name: "me", coordinated: true, notes: true, ratio: 0.9,
		devices: []gpu.Device{{UUID: fakeGPU}}, canStep: true, state: api.StateRunning,
		level: 0, levels: []string{"full", "half"}, grace: 5 * time.Second, sustain: time.Second,
		writable: func() error { return nil }}
}

func newActor(c Coordinator) *sharedState {
	var starting atomic.Bool
	t := newShared(c, func(string, ...any) {}, &starting)
	return &t
}

func TestSharedActorExecRefusesWhatItCannotTake(t *testing.T) {
	now := time.Now()
	fresh := api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, By: "other", At: now.UnixNano()}
	for _, tc := range []struct {
		name string
		st   api.TenantStep
		f    func(*peerFacts)
		want string
	}{
		{"observe mode or process scope", fresh, func(f *peerFacts) { f.coordinated = false }, "takes no part in shared decisions"},
		{"a claim past its TTL", api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, At: now.Add(-api.ClaimTTL).UnixNano()}, nil, "claims expire after"},
		{"a GPU it does not watch", api.TenantStep{GPU: "GPU-x", Seq: 3, Kind: api.KindDown, At: now.UnixNano()}, nil, "does not watch GPU GPU-x"},
		{"no child to step", fresh, func(f *peerFacts) { f.canStep, f.state = false, api.StateStepping }, "instance is stepping"},
		{"nothing lower", fresh, func(f *peerFacts) { f.level = 1 }, "already at the last profile half"},
		{"nothing higher", api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindUp, At: now.UnixNano()}, nil, "already at the first profile full"},
		{"a state file it cannot write", fresh, func(f *peerFacts) { f.writable = func() error { return errors.New("disk full") } }, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCoord{}
			a := newActor(c)
			f := actorFacts(now)
			if tc.f != nil {
				tc.f(&f)
			}
			_, o, err := a.exec(tc.st, true, f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("exec: %v, want an error with %q", err, tc.want)
			}
			if o.step != nil || len(c.confirms) != 0 || a.held(now) {
				t.Fatalf("a refused step asked for %+v, confirmed %v, held %v", o.step, c.confirms, a.held(now))
			}
		})
	}
}

func TestSharedActorExecStepsOnceAndHoldsForGrace(t *testing.T) {
	now := time.Now()
	c := &fakeCoord{}
	a := newActor(c)
	st := api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, By: "other", At: now.UnixNano(), Watermark: 0.93}
	d, o, err := a.exec(st, false, actorFacts(now))
	if err != nil || o.step == nil || o.step.kind != api.KindDown || d.Kind != api.KindDown {
		t.Fatalf("exec = %+v, %+v, %v; want a step down", d, o.step, err)
	}
	if want := "shared GPU " + fakeGPU + ": step down (seen by other, watermark 0.93); this instance ranks first"; o.step.why != want {
		t.Fatalf("why = %q, want %q", o.step.why, want)
	}
	if !a.held(now.Add(4*time.Second)) || a.held(now.Add(5*time.Second)) {
		t.Fatal("the GPU is not held for exactly the grace after the step")
	}
	if _, _, err := a.exec(st, false, actorFacts(now)); err == nil || !strings.Contains(err.Error(), "already executed decision 3") {
		t.Fatalf("the same decision again: %v", err)
	}
	// Our own proposal, decided by us alone: the rules' own detail ("").
	own := api.TenantStep{GPU: fakeGPU, Seq: 4, Kind: api.KindDown, By: "me", At: now.UnixNano()}
	if _, o, err := a.exec(own, false, actorFacts(now)); err != nil || o.step == nil || o.step.why != "" {
		t.Fatalf("own step: %+v, %v", o.step, err)
	}
}

func TestSharedActorNotesADecisionOnce(t *testing.T) {
	now := time.Now()
	a := newActor(&fakeCoord{})
	d := api.TenantDecision{GPU: fakeGPU, Seq: 7, Kind: api.KindPredicted, To: "other", At: now.UnixNano(), GraceSeconds: 2}
	o := a.note(d, actorFacts(now))
	if o.yield == nil || o.yield.Event != api.EventYield || o.yield.To != "other" || o.yield.Reason != api.ReasonPredicted || !o.gap {
		t.Fatalf("first note = %+v, want a yield to other and a gap", o)
	}
	if !a.held(now.Add(time.Second)) || a.held(now.Add(2*time.Second)) {
		t.Fatal("the GPU is not held for the decision's grace")
	}
	if o := a.note(d, actorFacts(now)); o.yield != nil || o.gap {
		t.Fatalf("the same decision noted again: %+v", o)
	}
	f := actorFacts(now)
	f.notes = false
	if o := a.note(api.TenantDecision{GPU: fakeGPU, Seq: 8, To: "other"}, f); o.yield != nil || o.gap {
		t.Fatalf("an instance that notes nothing noted %+v", o)
	}
}

func TestSharedActorOutcomes(t *testing.T) {
	now := time.Now()
	p := api.Proposal{GPU: fakeGPU, Kind: api.KindDown}
	a := newActor(&fakeCoord{})
	a.proposing = true
	if o := a.outcome(sharedResult{p, api.Outcome{Kind: api.OutcomeNoCandidate, Shared: true}}, actorFacts(now)); o.nobody == nil || !o.nobody.shared || o.nobody.gpu != fakeGPU || a.proposing {
		t.Fatalf("no candidate for a step down = %+v (proposing %v), want the critical alarm", o, a.proposing)
	}
	if !a.quietUntil[true].Equal(now.Add(time.Second)) {
		t.Fatalf("quiet until %v, want sustain (1s) after now", a.quietUntil[true])
	}
	f := actorFacts(now)
	if o := a.outcome(sharedResult{p, api.Outcome{Kind: api.OutcomeFailed, Err: errors.New("x")}}, f); o.step == nil || o.step.kind != api.KindDown || o.step.why != "" {
		t.Fatalf("a failed coordination = %+v, want the step decided alone", o)
	}
	f.canStep = false
	if o := a.outcome(sharedResult{p, api.Outcome{Kind: api.OutcomeFailed}}, f); o.step != nil {
		t.Fatalf("a failed coordination with no child to step asked for %+v", o.step)
	}
	if o := a.outcome(sharedResult{p, api.Outcome{Kind: api.OutcomeHold}}, f); o != (peerOutcome{}) {
		t.Fatalf("a hold for a decision in flight asked for %+v", o)
	}
}

// TestSharedActorUnwritableRefusalLoggedOnce: a tenant whose state file
// cannot be written refuses every step decided for it (the decider asks
// the next tenant), but says so once per run of refusals, not at every
// sample; the first step it can take again says the state file is
// writable again, and a new run of refusals is said once more. Other
// refusals are logged each time, as before.
func TestSharedActorUnwritableRefusalLoggedOnce(t *testing.T) {
	now := time.Now()
	var lines []string
	var starting atomic.Bool
	c := &fakeCoord{}
	a := newShared(c, func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }, &starting)
	full := errors.New("no space left on device")
	f := actorFacts(now)
	var seq int64
	step := func(f peerFacts) peerOutcome {
		seq++
		a.proposing = true
		claim := api.TenantStep{GPU: fakeGPU, Seq: seq, Kind: api.KindDown, By: "me", At: f.now.UnixNano()}
		return a.outcome(sharedResult{api.Proposal{GPU: fakeGPU, Kind: api.KindDown}, api.Outcome{Kind: api.OutcomeStep, Claim: claim}}, f)
	}
	f.writable = func() error { return fmt.Errorf("not stepping: writing the state file: %w", full) }
	for range 5 {
		if o := step(f); o.step != nil {
			t.Fatalf("a step with an unwritable state file was taken: %+v", o)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "while the state file cannot be written") || !strings.Contains(lines[0], full.Error()) {
		t.Fatalf("five refusals logged %q, want one line naming the write's error", lines)
	}
	f.writable = func() error { return nil }
	if o := step(f); o.step == nil {
		t.Fatal("the step after the state file recovered was not taken")
	}
	if len(lines) != 2 || !strings.Contains(lines[1], "can be written again") {
		t.Fatalf("lines %q, want the recovery said once", lines)
	}
	f.now = now.Add(time.Minute) // past the step's grace
	if o := step(f); o.step == nil || len(lines) != 2 {
		t.Fatalf("a second good step: %+v, lines %q (the recovery said again?)", o.step, lines)
	}
	f.writable = func() error { return fmt.Errorf("not stepping: writing the state file: %w", full) }
	step(f)
	step(f)
	if len(lines) != 3 || !strings.Contains(lines[2], "while the state file cannot be written") {
		t.Fatalf("a new run of refusals logged %q, want one more line", lines)
	}
	f.writable = func() error { return nil }
	f.canStep, f.state = false, api.StateStepping
	step(f)
	step(f)
	if len(lines) != 5 || !strings.Contains(lines[4], "instance is stepping") {
		t.Fatalf("other refusals logged %q, want each of them", lines)
	}
}
