package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// Coordinator is how the supervisor agrees with the other tenants of its
// GPUs (package tenants implements it). Decide, ClaimStart, Admit, Void and
// Announce may wait on files and on other tenants' sockets: the loop calls
// them off its goroutine and takes their outcome from a channel, so a hung
// peer never stalls it. Confirm only creates one local file and is called
// on the loop, as the state file is written there.
type Coordinator interface {
	Decide(ctx context.Context, p api.Proposal) api.Outcome
	Confirm(gpu string, seq int64, grace time.Duration) (api.TenantDecision, error)
	Void(gpu string, seq int64)
	Announce(d api.TenantDecision, sockets []string)
	ClaimStart(ctx context.Context, gpus []string, settle time.Duration) api.StartOutcome
	Admit(ctx context.Context, gpus []string) (*api.Admission, error)
	// SetLeases publishes this instance's outstanding leases to the other
	// tenants of gpus; calls are serialised, each with the current figure.
	SetLeases(gpus []string, bytes uint64) error
	// Publish tells the other tenants what this instance is (its ranking
	// facts). It must return at once: the loop calls it after each event.
	Publish(info api.TenantInfo)
}

// sharedState is the loop's side of the agreement between tenants.
type sharedState struct {
	outcomes chan sharedResult
	starts   chan api.StartOutcome

	// proposing: a proposal is with the coordinator; further verdicts wait
	// for its outcome.
	proposing bool
	// holdUntil: a decision (ours or noted) holds step proposals until
	// then: the GPU's cadence.
	holdUntil time.Time
	// quietUntil: nobody could step that way (true: down); do not ask
	// again before then.
	quietUntil map[bool]time.Time
	// executed is the newest decision seq executed here, per GPU.
	executed map[string]int64
	// seen are the decision seqs noted (or executed) per GPU, so a yield
	// is journaled once per decision however it is learnt.
	seen map[string]map[int64]bool
	// failNoted: a coordination failure was logged (once per run of them).
	failNoted bool
	// leasesPublished: the leases were published once the GPUs were known.
	leasesPublished bool

	start startState
}

type sharedResult struct {
	p api.Proposal
	o api.Outcome
}

func newShared() sharedState {
	return sharedState{outcomes: make(chan sharedResult, 1), starts: make(chan api.StartOutcome, 1),
		executed: map[string]int64{}, seen: map[string]map[int64]bool{}, quietUntil: map[bool]time.Time{}}
}

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
	return l.cfg.Observe && l.notesDecisions() && now.Before(l.shared.holdUntil)
}

// proposeShared takes the watermark verdict of a coordinated instance to
// the coordinator instead of acting on it. It reports whether it handled
// the sample (false: decide alone, as without tenants).
func (l *loop) proposeShared(now time.Time) bool {
	if !l.coordinated() {
		return false
	}
	if l.shared.proposing {
		return true
	}
	// On a shared GPU the proposal does not depend on our own level: at
	// the last profile (or the first, for a step up) another tenant may be
	// able to step. Level 1 of 3 makes the rules judge the GPU only; the
	// real ladder is checked by whoever is chosen.
	v := l.rules.observe(now, l.ratio, l.predicted(now), l.pol.Watermark, 1, 3)
	kind := proposalKind(v)
	if kind == "" || now.Before(l.shared.holdUntil) || now.Before(l.shared.quietUntil[api.IsDown(kind)]) {
		return true
	}
	gpu := worstGPU(l.lastSample.Devices, l.pol)
	if gpu == "" {
		return true
	}
	p := api.Proposal{GPU: gpu, Kind: kind, Watermark: l.ratio, Self: l.tenantInfo()}
	l.shared.proposing = true
	c, ctx, out, done := l.deps.Coordinator, l.ctx, l.shared.outcomes, l.s.done
	go func() {
		o := c.Decide(ctx, p)
		select {
		case out <- sharedResult{p, o}:
		case <-done:
		}
	}()
	return true
}

// proposalKind maps a watermark verdict to the decision it proposes; ""
// for none.
func proposalKind(v verdict) string {
	switch v {
	case stepDownLive:
		return api.KindDown
	case stepDownPredicted:
		return api.KindPredicted
	case restartLower:
		return api.KindCritical
	case stepUpOne:
		return api.KindUp
	}
	return ""
}

// worstGPU is the UUID of the GPU whose used/limit is highest: the one that
// crossed.
func worstGPU(devs []gpu.Device, pol *policy.Policy) string {
	best, worst := "", -1.0
	for _, d := range devs {
		if lim := pol.Limit(d.Total); lim > 0 {
			if r := float64(d.Used) / float64(lim); r > worst {
				best, worst = d.UUID, r
			}
		}
	}
	return best
}

// onOutcome acts on what the coordinator concluded about a proposal.
func (l *loop) onOutcome(r sharedResult) {
	l.shared.proposing = false
	now := time.Now()
	o := r.o
	if o.Kind != api.OutcomeFailed {
		l.shared.failNoted = false
	}
	switch o.Kind {
	case api.OutcomeStep:
		d, err := l.execShared(o.Claim, o.Shared)
		if err != nil {
			l.deps.Logf("not taking the step decided for this instance: %v", err)
			c := l.deps.Coordinator
			go c.Void(o.Claim.GPU, o.Claim.Seq)
			return
		}
		if len(o.Peers) > 0 {
			l.deps.Coordinator.Announce(d, o.Peers)
		}
	case api.OutcomeYield:
		l.noteDecision(o.Record)
	case api.OutcomeHold:
		if o.Record.Seq > 0 {
			l.noteDecision(o.Record)
		}
	case api.OutcomeNoCandidate:
		l.shared.quietUntil[api.IsDown(r.p.Kind)] = now.Add(max(l.pol.Watermark.Sustain, time.Second))
		if api.IsDown(r.p.Kind) {
			l.criticalNobody(now, r.p.GPU, o.Shared)
		}
	case api.OutcomeFailed:
		if !l.shared.failNoted {
			l.shared.failNoted = true
			l.deps.Logf("cannot agree with the other tenants of GPU %s (%v); deciding alone", r.p.GPU, o.Err)
		}
		if l.child != nil && !l.stopping && l.plan == nil && !l.acting() {
			l.stepKind(now, r.p.Kind, l.whyKind(r.p.Kind))
		}
	}
}

// execShared executes decision st for this instance: the coordinator's
// Step outcome for our own proposal, or another tenant's tenant_step. It
// refuses a claim older than api.ClaimTTL, one older than a decision it
// already executed, and a step it cannot take; it then confirms the claim
// (which fails if the decider gave it up) and only then steps. shared says
// whether other tenants took part (the detail names them).
func (l *loop) execShared(st api.TenantStep, shared bool) (api.TenantDecision, error) {
	now := time.Now()
	c := l.deps.Coordinator
	if c == nil || !l.coordinated() {
		return api.TenantDecision{}, fmt.Errorf("%s takes no part in shared decisions (observe mode or scope = \"process\")", l.cfg.Name)
	}
	if age := now.Sub(time.Unix(0, st.At)); age >= api.ClaimTTL {
		return api.TenantDecision{}, fmt.Errorf("decision %d of GPU %s is %s old; claims expire after %s", st.Seq, st.GPU, age.Round(time.Millisecond), api.ClaimTTL)
	}
	if st.Seq <= l.shared.executed[st.GPU] {
		return api.TenantDecision{}, fmt.Errorf("already executed decision %d of GPU %s", l.shared.executed[st.GPU], st.GPU)
	}
	if !l.watches(st.GPU) {
		return api.TenantDecision{}, fmt.Errorf("%s does not watch GPU %s", l.cfg.Name, st.GPU)
	}
	if l.child == nil || l.stopping || l.plan != nil || l.acting() {
		return api.TenantDecision{}, fmt.Errorf("instance is %s; try again once it runs", l.state)
	}
	to := l.level + 1
	if st.Kind == api.KindUp {
		to = l.level - 1
	}
	if to < 0 || to >= len(l.pol.Profiles) {
		return api.TenantDecision{}, fmt.Errorf("already at the %s profile %s", map[bool]string{true: "first", false: "last"}[to < 0], l.pol.Profiles[l.level].Name)
	}
	// A step whose state file cannot be written would not happen after
	// the confirmation, and the GPU would hold for our grace for nothing:
	// refuse, and the decider asks the next tenant.
	if err := l.stateWritable(); err != nil {
		return api.TenantDecision{}, err
	}
	d, err := c.Confirm(st.GPU, st.Seq, l.pol.Watermark.Grace)
	if err != nil {
		return api.TenantDecision{}, err
	}
	d.Kind = st.Kind
	l.shared.executed[st.GPU] = st.Seq
	l.markSeen(st.GPU, st.Seq)
	why := l.whyKind(st.Kind)
	if shared || st.By != l.cfg.Name {
		why = fmt.Sprintf("shared GPU %s: %s (seen by %s, watermark %.2f); this instance ranks first", st.GPU, kindText(st.Kind), st.By, st.Watermark)
	}
	l.stepKind(now, st.Kind, why)
	l.shared.holdUntil = now.Add(l.pol.Watermark.Grace)
	return d, nil
}

// stepKind performs a decision of kind here, as the watermark rules of a
// lone instance do. The caller has checked that the ladder allows it.
func (l *loop) stepKind(now time.Time, kind, why string) {
	last := l.level >= len(l.pol.Profiles)-1
	switch {
	case kind == api.KindUp:
		if l.level == 0 {
			return
		}
		saved := l.rules
		l.rules.stepped(now)
		if !l.changeProfile(l.level-1, api.ReasonRecovered, why, nil) {
			l.rules = saved // not taken: the next sample tries again
		}
	case last:
		l.criticalNobody(now, "", false)
	case kind == api.KindCritical:
		l.rules.stepped(now)
		l.emitStep(api.EventStepDown, l.level+1, api.ReasonCritical, why)
		l.beginRestart(l.level+1, api.ReasonCritical, nil)
	default:
		saved := l.rules
		l.rules.stepped(now)
		if !l.changeProfile(l.level+1, kindReason(kind), why, nil) {
			l.rules = saved // not taken: the next sample tries again
		}
	}
}

// noteDecision records a decision another tenant executed on a GPU we
// watch: a yield (once per decision), the sustain timer restarts, and no
// step is proposed before its grace has passed.
//
// An observing tenant notes them too: it takes no part in the decision, but
// another tenant's step is its yield like anyone's, and what it would
// have done waits for that step's grace (see observeHeld).
func (l *loop) noteDecision(d api.TenantDecision) {
	if !l.notesDecisions() || !l.watches(d.GPU) || l.seenSeq(d.GPU, d.Seq) {
		return
	}
	l.markSeen(d.GPU, d.Seq)
	if d.To != l.cfg.Name {
		l.emit(api.Event{Event: api.EventYield, To: d.To, GPU: d.GPU, Reason: kindReason(d.Kind), Watermark: l.ratio,
			Detail: fmt.Sprintf("%s: %s by %s, which ranks first on the shared GPU", d.GPU, kindText(d.Kind), d.To)})
		l.deps.Logf("yield: %s takes the %s on shared GPU %s", d.To, kindText(d.Kind), d.GPU)
	}
	// A step elsewhere is like a gap here: `sustain` of fresh readings
	// again before the next proposal.
	l.rules.gap()
	if until := time.Unix(0, d.At).Add(time.Duration(d.GraceSeconds * float64(time.Second))); until.After(l.shared.holdUntil) {
		l.shared.holdUntil = until
	}
}

// criticalNobody is the rate-limited `critical` event when the watermark
// is at or above critical and no tenant (on a GPU of our own: not we) can
// step lower.
func (l *loop) criticalNobody(now time.Time, gpu string, shared bool) {
	wm := l.pol.Watermark
	if l.ratio < wm.Critical || (!l.rules.lastFloorAlarm.IsZero() && now.Sub(l.rules.lastFloorAlarm) < wm.Grace) {
		return
	}
	l.rules.lastFloorAlarm = now
	detail := fmt.Sprintf("watermark %.2f >= critical %.2f at the last profile; nothing lower to step to", l.ratio, wm.Critical)
	if shared {
		detail = fmt.Sprintf("watermark %.2f >= critical %.2f and no tenant of shared GPU %s can step lower", l.ratio, wm.Critical, gpu)
	}
	l.emit(api.Event{Event: api.EventCritical, Watermark: l.ratio, GPU: gpu, Detail: detail})
	l.deps.Logf("%s", detail)
}

// onSharedRequest handles the shared-GPU requests of the control socket.
func (l *loop) onSharedRequest(r request) {
	switch r.op {
	case opTenantStep:
		d, err := l.execShared(r.tenantStep, true)
		r.reply <- response{tenantDecision: d, err: err}
	case opTenantDecision:
		l.noteDecision(r.tenantDecision)
		r.reply <- response{}
	case opReady:
		l.endStarting("the child said ready")
		r.reply <- response{}
	case opEmit:
		l.emit(r.event)
		r.reply <- response{}
	}
}

func (l *loop) watches(uuid string) bool {
	for _, d := range l.lastSample.Devices {
		if d.UUID == uuid {
			return true
		}
	}
	return false
}

func (l *loop) seenSeq(gpu string, seq int64) bool { return l.shared.seen[gpu][seq] }

// markSeen remembers seq, keeping the newest 64 seqs per GPU.
func (l *loop) markSeen(gpu string, seq int64) {
	m := l.shared.seen[gpu]
	if m == nil {
		m = map[int64]bool{}
		l.shared.seen[gpu] = m
	}
	m[seq] = true
	if len(m) > 64 {
		for s := range m {
			if s < seq-32 {
				delete(m, s)
			}
		}
	}
}

// predicted says whether the trend asks for a predicted step. A server's
// own start-up (weights, cache, CUDA graphs) is growth toward its budget,
// not toward an OOM: no predicted step until it has run for grace, the time
// a step is given to take effect.
func (l *loop) predicted(now time.Time) bool {
	return l.fc.Predicted && now.Sub(l.childStart) >= l.pol.Watermark.Grace
}

// whyKind is the detail of a step decided by our own rules alone.
func (l *loop) whyKind(kind string) string {
	wm := l.pol.Watermark
	switch kind {
	case api.KindCritical:
		return fmt.Sprintf("watermark %.2f >= critical %.2f %s after a step", l.ratio, wm.Critical, wm.Grace)
	case api.KindUp:
		return fmt.Sprintf("watermark %.2f < %.2f for %s", l.ratio, wm.Low, wm.RecoverAfter)
	case api.KindPredicted:
		return fmt.Sprintf("watermark %.2f rising: critical %.2f in %.1fs (lead %s)", l.ratio, wm.Critical, l.fc.ETA.Seconds(), wm.Lead)
	}
	return fmt.Sprintf("watermark %.2f > %.2f", l.ratio, wm.High)
}

func kindReason(kind string) string {
	switch kind {
	case api.KindCritical:
		return api.ReasonCritical
	case api.KindPredicted:
		return api.ReasonPredicted
	case api.KindUp:
		return api.ReasonRecovered
	}
	return api.ReasonWatermark
}

func kindText(kind string) string {
	switch kind {
	case api.KindCritical:
		return "critical restart one profile lower"
	case api.KindPredicted:
		return "predicted step down"
	case api.KindUp:
		return "step up"
	}
	return "step down"
}
