package sharing

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// The agreement on its own, without a supervisor: each input with the
// instance's facts of the moment, and the core inputs it asks back.

const fakeGPU = sharingtest.GPU

func self(now time.Time) core.Tenant {
	return core.Tenant{Now: now, Name: "me", Coordinated: true, Notes: true, Ratio: 0.9, ETA: 2,
		GPUs: []string{fakeGPU}, Steady: true, State: api.StateRunning,
		Level: 0, Profiles: []string{"full", "half"}, Grace: 5 * time.Second, Sustain: time.Second,
		Writable: func() error { return nil }}
}

func newPeers(c Coordinator) *Peers { return New(c, func(string, ...any) {}) }

func TestExecRefusesWhatItCannotTake(t *testing.T) {
	now := time.Now()
	fresh := api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, By: "other", At: now.UnixNano()}
	for _, tc := range []struct {
		name string
		st   api.TenantStep
		f    func(*core.Tenant)
		want string
	}{
		{"observe mode or process scope", fresh, func(f *core.Tenant) { f.Coordinated = false }, "takes no part in shared decisions"},
		{"a claim past its TTL", api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, At: now.Add(-api.ClaimTTL).UnixNano()}, nil, "claims expire after"},
		{"a GPU it does not watch", api.TenantStep{GPU: "GPU-x", Seq: 3, Kind: api.KindDown, At: now.UnixNano()}, nil, "does not watch GPU GPU-x"},
		{"no child to step", fresh, func(f *core.Tenant) { f.Steady, f.State = false, api.StateStepping }, "instance is stepping"},
		{"nothing lower", fresh, func(f *core.Tenant) { f.Level = 1 }, "already at the last profile half"},
		{"nothing higher", api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindUp, At: now.UnixNano()}, nil, "already at the first profile full"},
		{"a state file it cannot write", fresh, func(f *core.Tenant) { f.Writable = func() error { return errors.New("disk full") } }, "disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &sharingtest.Coord{}
			p := newPeers(c)
			f := self(now)
			if tc.f != nil {
				tc.f(&f)
			}
			_, ins, err := p.Step(tc.st, f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Step: %v, want an error with %q", err, tc.want)
			}
			if len(ins) != 0 || len(c.Confirms()) != 0 || p.Held(now) {
				t.Fatalf("a refused step asked for %+v, confirmed %v, held %v", ins, c.Confirms(), p.Held(now))
			}
		})
	}
}

func TestExecStepsOnceAndHoldsForGrace(t *testing.T) {
	now := time.Now()
	c := &sharingtest.Coord{}
	p := newPeers(c)
	st := api.TenantStep{GPU: fakeGPU, Seq: 3, Kind: api.KindDown, By: "other", At: now.UnixNano(), Watermark: 0.93}
	d, ins, err := p.Step(st, self(now))
	want := []core.Input{core.Peer{Now: now, Reason: core.Watermark, Ratio: 0.9, ETA: 2,
		Why: "shared GPU " + fakeGPU + ": step down (seen by other, watermark 0.93); this instance ranks first"}}
	if err != nil || d.Kind != api.KindDown || !slices.Equal(ins, want) {
		t.Fatalf("Step = %+v, %+v, %v; want a step down %+v", d, ins, err, want)
	}
	if !p.Held(now.Add(4*time.Second)) || p.Held(now.Add(5*time.Second)) {
		t.Fatal("the GPU is not held for exactly the grace after the step")
	}
	if _, _, err := p.Step(st, self(now)); err == nil || !strings.Contains(err.Error(), "already executed decision 3") {
		t.Fatalf("the same decision again: %v", err)
	}
	// Our own proposal, decided by us alone: the rules' own detail (no Why).
	p.proposal = &api.Proposal{GPU: fakeGPU, Kind: api.KindDown}
	own := api.TenantStep{GPU: fakeGPU, Seq: 4, Kind: api.KindDown, By: "me", At: now.UnixNano()}
	ins = p.Outcome(api.Outcome{Kind: api.OutcomeStep, Claim: own}, self(now))
	if want := []core.Input{core.Peer{Now: now, Reason: core.Watermark, Ratio: 0.9, ETA: 2}}; !slices.Equal(ins, want) {
		t.Fatalf("own step: %+v, want %+v", ins, want)
	}
}

func TestNotesADecisionOnce(t *testing.T) {
	now := time.Now()
	p := newPeers(&sharingtest.Coord{})
	d := api.TenantDecision{GPU: fakeGPU, Seq: 7, Kind: api.KindPredicted, To: "other", At: now.UnixNano(), GraceSeconds: 2}
	want := []core.Input{core.Yielded{GPU: fakeGPU, To: "other", Kind: api.KindPredicted, Ratio: 0.9}}
	if ins := p.Note(d, self(now)); !slices.Equal(ins, want) {
		t.Fatalf("first note = %+v, want %+v", ins, want)
	}
	if !p.Held(now.Add(time.Second)) || p.Held(now.Add(2*time.Second)) {
		t.Fatal("the GPU is not held for the decision's grace")
	}
	if ins := p.Note(d, self(now)); ins != nil {
		t.Fatalf("the same decision noted again: %+v", ins)
	}
	mine := api.TenantDecision{GPU: fakeGPU, Seq: 8, To: "me", At: now.UnixNano()}
	if ins := p.Note(mine, self(now)); len(ins) != 1 || !ins[0].(core.Yielded).Self {
		t.Fatalf("a decision for this instance: %+v, want it noted as its own", ins)
	}
	f := self(now)
	f.Notes = false
	if ins := p.Note(api.TenantDecision{GPU: fakeGPU, Seq: 9, To: "other"}, f); ins != nil {
		t.Fatalf("an instance that notes nothing noted %+v", ins)
	}
}

func TestOutcomes(t *testing.T) {
	now := time.Now()
	down := api.Proposal{GPU: fakeGPU, Kind: api.KindDown}
	p := newPeers(&sharingtest.Coord{})
	outcome := func(o api.Outcome, f core.Tenant) []core.Input {
		p.proposal = &down
		return p.Outcome(o, f)
	}
	want := []core.Input{core.PeerNobody{Now: now, Ratio: 0.9, GPU: fakeGPU, Shared: true}}
	if ins := outcome(api.Outcome{Kind: api.OutcomeNoCandidate, Shared: true}, self(now)); !slices.Equal(ins, want) || p.Proposing() {
		t.Fatalf("no candidate for a step down = %+v (proposing %v), want %+v", ins, p.Proposing(), want)
	}
	if !p.quietUntil[true].Equal(now.Add(time.Second)) {
		t.Fatalf("quiet until %v, want sustain (1s) after now", p.quietUntil[true])
	}
	f := self(now)
	want = []core.Input{core.Peer{Now: now, Reason: core.Watermark, Ratio: 0.9, ETA: 2}}
	if ins := outcome(api.Outcome{Kind: api.OutcomeFailed, Err: errors.New("x")}, f); !slices.Equal(ins, want) {
		t.Fatalf("a failed coordination = %+v, want the step decided alone %+v", ins, want)
	}
	f.Steady = false
	if ins := outcome(api.Outcome{Kind: api.OutcomeFailed}, f); ins != nil {
		t.Fatalf("a failed coordination with no child to step asked for %+v", ins)
	}
	if ins := outcome(api.Outcome{Kind: api.OutcomeHold}, f); ins != nil {
		t.Fatalf("a hold for a decision in flight asked for %+v", ins)
	}
}

// TestAnnouncedAfterTheStep: the decision this instance was chosen for is
// announced to the other tenants only when Announce is called, after the
// instance has taken the step the outcome asked for.
func TestAnnouncedAfterTheStep(t *testing.T) {
	now := time.Now()
	c := &sharingtest.Coord{}
	p := newPeers(c)
	p.proposal = &api.Proposal{GPU: fakeGPU, Kind: api.KindDown}
	claim := api.TenantStep{GPU: fakeGPU, Seq: 9, Kind: api.KindDown, By: "me", At: now.UnixNano()}
	ins := p.Outcome(api.Outcome{Kind: api.OutcomeStep, Claim: claim, Peers: []string{"/run/other.sock"}, Shared: true}, self(now))
	if announced := c.Announced(); len(ins) != 1 || len(announced) != 0 {
		t.Fatalf("inputs %+v, announced %+v: want the step, not yet announced", ins, announced)
	}
	p.Announce()
	p.Announce()
	if announced := c.Announced(); len(announced) != 1 || announced[0].Seq != 9 {
		t.Fatalf("announced %+v, want decision 9 once", announced)
	}
}

// TestUnwritableRefusalLoggedOnce: a tenant whose state file cannot be
// written refuses every step decided for it (the decider asks the next
// tenant), but says so once per run of refusals, not at every sample; the
// first step it can take again says the state file is writable again,
// and a new run of refusals is said once more. Other refusals are logged
// each time.
func TestUnwritableRefusalLoggedOnce(t *testing.T) {
	now := time.Now()
	var lines []string
	c := &sharingtest.Coord{}
	p := New(c, func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	full := errors.New("no space left on device")
	f := self(now)
	var seq int64
	step := func(f core.Tenant) []core.Input {
		seq++
		p.proposal = &api.Proposal{GPU: fakeGPU, Kind: api.KindDown}
		claim := api.TenantStep{GPU: fakeGPU, Seq: seq, Kind: api.KindDown, By: "me", At: f.Now.UnixNano()}
		return p.Outcome(api.Outcome{Kind: api.OutcomeStep, Claim: claim}, f)
	}
	f.Writable = func() error { return fmt.Errorf("not stepping: writing the state file: %w", full) }
	for range 5 {
		if ins := step(f); ins != nil {
			t.Fatalf("a step with an unwritable state file was taken: %+v", ins)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "while the state file cannot be written") || !strings.Contains(lines[0], full.Error()) {
		t.Fatalf("five refusals logged %q, want one line naming the write's error", lines)
	}
	f.Writable = func() error { return nil }
	if ins := step(f); ins == nil {
		t.Fatal("the step after the state file recovered was not taken")
	}
	if len(lines) != 2 || !strings.Contains(lines[1], "can be written again") {
		t.Fatalf("lines %q, want the recovery said once", lines)
	}
	f.Now = now.Add(time.Minute) // past the step's grace
	if ins := step(f); ins == nil || len(lines) != 2 {
		t.Fatalf("a second good step: %+v, lines %q (the recovery said again?)", ins, lines)
	}
	f.Writable = func() error { return fmt.Errorf("not stepping: writing the state file: %w", full) }
	step(f)
	step(f)
	if len(lines) != 3 || !strings.Contains(lines[2], "while the state file cannot be written") {
		t.Fatalf("a new run of refusals logged %q, want one more line", lines)
	}
	f.Writable = func() error { return nil }
	f.Steady, f.State = false, api.StateStepping
	step(f)
	step(f)
	if len(lines) != 5 || !strings.Contains(lines[4], "instance is stepping") {
		t.Fatalf("other refusals logged %q, want each of them", lines)
	}
}
