package supervisor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// The agreement's side of its inputs from the loop: when a sample becomes
// a proposal, and how what comes back is performed, through the decision
// core (coreFeed) and the journal, never through the loop's fields. A lone
// instance (no coordinator) never gets here for a step: applyWatermark
// branches on coordinated once.

// coreFeed is how the agreement has the instance act: journal lines, and
// inputs to the decision core whose effects the loop performs. The loop
// implements it.
type coreFeed interface {
	journal
	decide(in core.Input) []core.Effect
	doAll(effs []core.Effect, reply chan response)
}

// loopFeed is the loop as a coreFeed: journal lines go to its reporter,
// inputs to its decision core. The loop hands it out instead of itself,
// so that its voice stays one room (reporter.go) and not its methods.
type loopFeed struct {
	*reporter
	*loop
}

// coordinated reports whether this instance takes part in the decisions of
// shared GPUs: it has a coordinator, enforces (not observe mode) and
// watches the device's memory (scope = "process" steps by its own quota).
func (t *sharedState) coordinated(observe bool, scope string) bool {
	return t.c != nil && !observe && scope == policy.ScopeDevice
}

// notesDecisions reports whether this instance journals the other
// tenants' decisions as yields: a coordinated one, or one in observe mode
// that watches the device's memory (a process-scope instance steps by its
// own quota, so a step elsewhere does not answer its pressure).
func (t *sharedState) notesDecisions(scope string) bool {
	return t.c != nil && scope == policy.ScopeDevice
}

// observeHeld reports whether an observing tenant keeps what it would do
// to itself for now: another tenant stepped for this pressure and its
// grace has not passed.
func (t *sharedState) observeHeld(now time.Time, observe bool, scope string) bool {
	return observe && t.notesDecisions(scope) && t.held(now)
}

// proposeSample takes a coordinated instance's sample in to the
// coordinator instead of acting on it: the watermark rules judge it
// (rules, the loop's core's), and their verdict goes out as a proposal
// for the worst of devs. facts is read only when a proposal is made.
func (t *sharedState) proposeSample(ctx context.Context, done <-chan struct{}, in core.Sample, rules *core.Rules,
	pol *policy.Policy, devs []gpu.Device, facts func(time.Time) peerFacts) {
	if t.proposing {
		return
	}
	// On a shared GPU the proposal does not depend on our own level: at
	// the last profile (or the first, for a step up) another tenant may be
	// able to step. Level 1 of 3 makes the rules judge the GPU only; the
	// real ladder is checked by whoever is chosen.
	v := rules.Observe(in.Now, in.Ratio, in.Predicted, pol.Watermark, 1, 3)
	self := func() api.TenantInfo { return facts(in.Now).tenant() }
	t.propose(ctx, done, in.Now, proposalKind(v), worstGPU(devs, pol), in.Ratio, self)
}

// onOutcome performs what the coordinator's outcome for a proposal asks.
func (t *sharedState) onOutcome(r sharedResult, f peerFacts, do coreFeed) {
	t.perform(t.outcome(r, f), f, do)
}

// perform carries out a peerOutcome, in its order: a step enters the
// decision core as a peer's verdict (core.Peer), told with the detail of
// the instance's own rules when the tenants gave none.
func (t *sharedState) perform(o peerOutcome, f peerFacts, do coreFeed) {
	if o.yield != nil {
		do.emit(*o.yield)
	}
	if o.log != "" {
		do.logf("%s", o.log)
	}
	if o.gap {
		do.decide(core.Gap{})
	}
	if s := o.step; s != nil {
		r := core.ReasonOfKind(s.kind)
		why := s.why
		if why == "" {
			why = r.Why(f.ratio, f.wm, f.eta)
		}
		do.doAll(do.decide(core.Peer{Now: f.now, Reason: r, Why: why, Ratio: f.ratio}), nil)
	}
	if o.nobody != nil {
		do.doAll(do.decide(core.PeerNobody{Now: f.now, Ratio: f.ratio, GPU: o.nobody.gpu, Shared: o.nobody.shared}), nil)
	}
	if o.announce != nil {
		t.announce(*o.announce)
	}
}

// request handles the shared-GPU requests of the control socket; facts
// are read when one needs them.
func (t *sharedState) request(r request, facts func(time.Time) peerFacts, do coreFeed) {
	switch r.op {
	case opTenantStep:
		f := facts(time.Now())
		d, o, err := t.exec(r.tenantStep, true, f)
		t.perform(o, f, do)
		r.reply <- response{tenantDecision: d, err: err}
	case opTenantDecision:
		f := facts(time.Now())
		t.perform(t.note(r.tenantDecision, f), f, do)
		r.reply <- response{}
	case opReady:
		t.endStarting("the child said ready")
		r.reply <- response{}
	case opEmit:
		do.emit(r.event)
		r.reply <- response{}
	}
}

// publishTenant publishes the TenantInfo of f, which TenantInfo answers
// from (into store), and tells the other tenants; the leases are
// published too (publish, off the loop) once the GPUs are first known.
func (t *sharedState) publishTenant(f peerFacts, store *atomic.Pointer[api.TenantInfo], publish func() error) {
	info := f.tenant()
	store.Store(&info)
	if t.published(info) {
		t.leasesChanged(publish)
	}
}

// leasesChanged publishes the leases (publish: Admission.publishLeases)
// after the loop changed them (expiry, the child's exit), off the loop.
func (t *sharedState) leasesChanged(publish func() error) {
	if t.c != nil {
		go publish()
	}
}

// peerFacts are the loop's facts for an input to the agreement at now:
// the one place the agreement's inputs read the loop's fields.
func (l *loop) peerFacts(now time.Time) peerFacts {
	names := make([]string, len(l.pol.Profiles))
	for i, p := range l.pol.Profiles {
		names[i] = p.Name
	}
	self := tenantFacts{pid: l.s.snap.Load().status.PID, priority: l.pol.Priority, scope: l.pol.Watch.Scope,
		observe: l.cfg.Observe, settle: l.pol.Watch.Settle, have: l.latest.haveSample, sample: l.latest.lastSample,
		running: l.life.run.child != nil, tree: l.life.run.childTree}
	return peerFacts{now: now, name: l.cfg.Name, coordinated: l.shared.coordinated(l.cfg.Observe, l.pol.Watch.Scope),
		notes: l.shared.notesDecisions(l.pol.Watch.Scope), ratio: l.latest.ratio, devices: l.latest.lastSample.Devices,
		canStep: l.life.run.child != nil && !l.life.stop.stopping && l.life.plan == nil && !l.acts.acting(), state: l.life.state,
		level: l.level, levels: names, grace: l.pol.Watermark.Grace, sustain: l.pol.Watermark.Sustain,
		wm: l.pol.Watermark, eta: l.pace.fc.ETA.Seconds(), self: self,
		writable: func() error { return l.stateFile.writable(l.pol.Profiles[l.level], l.level) }}
}

// claims is what a start claim is made with now (claimCtx).
func (l *loop) claims() claimCtx {
	return claimCtx{ctx: l.ctx, done: l.s.done, devs: l.latest.lastSample.Devices, settle: l.pol.Watch.Settle, pace: &l.pace}
}
