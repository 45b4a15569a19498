package supervisor

import (
	"time"

	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// The loop's side of the shared-GPU agreement (sharedState): when it
// hands the agreement an input, with which facts, and how it performs
// what comes back. A lone instance (no coordinator) never gets here for a
// step: applyWatermark branches on coordinated once.

// coordinated reports whether this instance takes part in the decisions of
// shared GPUs: it has a coordinator, enforces (not --observe) and watches
// the device's memory (scope = "process" steps by its own quota).
func (l *loop) coordinated() bool {
	return l.deps.Coordinator != nil && !l.cfg.Observe && l.pol.Watch.Scope == policy.ScopeDevice
}

// notesDecisions reports whether this instance journals the other
// tenants' decisions as yields: a coordinated one, or one in observe mode
// that watches the device's memory (a process-scope instance steps by its
// own quota, so a step elsewhere does not answer its pressure).
func (l *loop) notesDecisions() bool {
	return l.deps.Coordinator != nil && l.pol.Watch.Scope == policy.ScopeDevice
}

// observeHeld reports whether an observing tenant keeps what it would do
// to itself for now: another tenant stepped for this pressure and its
// grace has not passed.
func (l *loop) observeHeld(now time.Time) bool {
	return l.cfg.Observe && l.notesDecisions() && l.shared.held(now)
}

// proposeShared takes the watermark verdict of a coordinated instance to
// the coordinator instead of acting on it.
func (l *loop) proposeShared(now time.Time) {
	if l.shared.proposing {
		return
	}
	// On a shared GPU the proposal does not depend on our own level: at
	// the last profile (or the first, for a step up) another tenant may be
	// able to step. Level 1 of 3 makes the rules judge the GPU only; the
	// real ladder is checked by whoever is chosen.
	v := l.core.Rules.Observe(now, l.latest.ratio, l.predicted(now), l.pol.Watermark, 1, 3)
	l.shared.propose(l.ctx, l.s.done, now, proposalKind(v), worstGPU(l.latest.lastSample.Devices, l.pol), l.latest.ratio, l.tenantInfo)
}

// peerFacts are the loop's facts for an input to the agreement at now.
func (l *loop) peerFacts(now time.Time) peerFacts {
	names := make([]string, len(l.pol.Profiles))
	for i, p := range l.pol.Profiles {
		names[i] = p.Name
	}
	return peerFacts{now: now, name: l.cfg.Name, coordinated: l.coordinated(), notes: l.notesDecisions(),
		ratio: l.latest.ratio, devices: l.latest.lastSample.Devices,
		canStep: l.life.run.child != nil && !l.life.stop.stopping && l.life.plan == nil && !l.acts.acting(), state: l.life.state,
		level: l.level, levels: names, grace: l.pol.Watermark.Grace, sustain: l.pol.Watermark.Sustain,
		writable: func() error { return l.stateFile.writable(l.pol.Profiles[l.level], l.level) }}
}

// onOutcome performs what the coordinator's outcome for a proposal asks.
func (l *loop) onOutcome(r sharedResult) {
	now := time.Now()
	l.perform(now, l.shared.outcome(r, l.peerFacts(now)))
}

// perform carries out a peerOutcome, in its order.
func (l *loop) perform(now time.Time, o peerOutcome) {
	if o.yield != nil {
		l.emit(*o.yield)
	}
	if o.log != "" {
		l.deps.Logf("%s", o.log)
	}
	if o.gap {
		l.decide(core.Gap{})
	}
	if s := o.step; s != nil {
		why := s.why
		if why == "" {
			why = l.whyKind(s.kind)
		}
		l.stepKind(now, s.kind, why)
	}
	if o.nobody != nil {
		l.criticalNobody(now, o.nobody.gpu, o.nobody.shared)
	}
	if o.announce != nil {
		l.shared.announce(*o.announce)
	}
}

// onSharedRequest handles the shared-GPU requests of the control socket.
func (l *loop) onSharedRequest(r request) {
	switch r.op {
	case opTenantStep:
		now := time.Now()
		d, o, err := l.shared.exec(r.tenantStep, true, l.peerFacts(now))
		l.perform(now, o)
		r.reply <- response{tenantDecision: d, err: err}
	case opTenantDecision:
		now := time.Now()
		l.perform(now, l.shared.note(r.tenantDecision, l.peerFacts(now)))
		r.reply <- response{}
	case opReady:
		l.shared.endStarting("the child said ready")
		r.reply <- response{}
	case opEmit:
		l.emit(r.event)
		r.reply <- response{}
	}
}

// publishTenant publishes the TenantInfo that TenantInfo answers from.
func (l *loop) publishTenant() {
	info := l.tenantInfo()
	l.s.tenant.Store(&info)
	if l.shared.published(info) {
		l.leasesChanged()
	}
}

// leasesChanged publishes the leases after the loop changed them (expiry,
// the child's exit), off the loop.
func (l *loop) leasesChanged() {
	if l.deps.Coordinator != nil {
		go l.s.publishLeases()
	}
}
