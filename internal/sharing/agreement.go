package sharing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// agreement is the tenants' agreement on who steps for a shared GPU's
// pressure, as this instance takes part in it: its own state (the
// proposal in flight, the GPU's cadence, the decisions executed and seen)
// and what it asks of the instance, as inputs to the decision core.
type agreement struct {
	c    Coordinator
	logf func(format string, args ...any)

	outcomes chan api.Outcome
	// proposal is the proposal with the coordinator (nil: none); further
	// verdicts wait for its outcome.
	proposal *api.Proposal
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
	// unwritable: a step decided for this instance was refused because
	// its state file cannot be written, and that was logged; the next
	// step whose state file can be written says so (once per run of
	// refusals: the decider asks again at every sample).
	unwritable bool
	// announcing are the decisions executed here that the other tenants
	// are to hear of (Announce), once the instance has taken the step.
	announcing []announcement
}

// announcement tells the tenants at peers of decision d.
type announcement struct {
	d     api.TenantDecision
	peers []string
}

func newAgreement(c Coordinator, logf func(format string, args ...any)) agreement {
	return agreement{c: c, logf: logf, outcomes: make(chan api.Outcome, 1),
		executed: map[string]int64{}, seen: map[string]map[int64]bool{}, quietUntil: map[bool]time.Time{}}
}

// Proposing reports whether a proposal is with the coordinator.
func (a *agreement) Proposing() bool { return a.proposal != nil }

// Held reports whether a decision's cadence holds the GPU at now.
func (a *agreement) Held(now time.Time) bool { return now.Before(a.holdUntil) }

// Outcomes is where the coordinator's outcome of a proposal comes.
func (a *agreement) Outcomes() <-chan api.Outcome { return a.outcomes }

// Propose takes the instance's verdict (a step for reason, on the worst
// watched GPU gpu at ratio) to the coordinator, off the loop; the
// outcome comes back on Outcomes. Nothing goes out during the GPU's
// cadence, before a pause after nobody could step that way, or without a
// GPU; self is asked only when a proposal goes out.
func (a *agreement) Propose(ctx context.Context, now time.Time, reason core.Reason, gpu string, ratio float64, self func() api.TenantInfo) {
	kind := reason.Kind()
	if kind == "" || now.Before(a.holdUntil) || now.Before(a.quietUntil[api.IsDown(kind)]) || gpu == "" {
		return
	}
	p := api.Proposal{GPU: gpu, Kind: kind, Watermark: ratio, Self: self()}
	a.proposal = &p
	c := a.c
	offLoop(ctx, a.outcomes, func() api.Outcome { return c.Decide(ctx, p) })
}

// Outcome acts on what the coordinator concluded about the proposal in
// flight: the step this instance was chosen for, a yield to note, the
// alarm when nobody can step, or, when the coordination failed, the step
// decided alone.
func (a *agreement) Outcome(o api.Outcome, t core.Tenant) []core.Input {
	if a.proposal == nil {
		return nil
	}
	p := *a.proposal
	a.proposal = nil
	if o.Kind != api.OutcomeFailed {
		a.failNoted = false
	}
	switch o.Kind {
	case api.OutcomeStep:
		d, ins, err := a.exec(o.Claim, o.Shared, t)
		if err != nil {
			a.refused(err)
			c := a.c
			go c.Void(o.Claim.GPU, o.Claim.Seq)
			return nil
		}
		if len(o.Peers) > 0 {
			a.announcing = append(a.announcing, announcement{d, o.Peers})
		}
		return ins
	case api.OutcomeYield:
		return a.Note(o.Record, t)
	case api.OutcomeHold:
		if o.Record.Seq > 0 {
			return a.Note(o.Record, t)
		}
	case api.OutcomeNoCandidate:
		down := api.IsDown(p.Kind)
		a.quietUntil[down] = t.Now.Add(max(t.Sustain, time.Second))
		if down {
			return []core.Input{core.PeerNobody{Now: t.Now, Ratio: t.Ratio, GPU: p.GPU, Shared: o.Shared}}
		}
	case api.OutcomeFailed:
		if !a.failNoted {
			a.failNoted = true
			a.logf("cannot agree with the other tenants of GPU %s (%v); deciding alone", p.GPU, o.Err)
		}
		if t.Steady {
			return []core.Input{core.Peer{Now: t.Now, Reason: core.ReasonOfKind(p.Kind), Ratio: t.Ratio, ETA: t.ETA}}
		}
	}
	return nil
}

// Step executes a decision another tenant took for this instance, or
// refuses it (exec).
func (a *agreement) Step(st api.TenantStep, t core.Tenant) (api.TenantDecision, []core.Input, error) {
	return a.exec(st, true, t)
}

// Announce tells the other tenants of the decisions executed here since
// the last call.
func (a *agreement) Announce() {
	for _, n := range a.announcing {
		a.c.Announce(n.d, n.peers)
	}
	a.announcing = nil
}

// stateRefusal is exec's refusal of a step whose state file cannot be
// written; its text is the write's error, as the decider is told.
type stateRefusal struct{ err error }

func (e stateRefusal) Error() string { return e.err.Error() }
func (e stateRefusal) Unwrap() error { return e.err }

// refused logs why a step decided for this instance is not taken: every
// time, but a state file that cannot be written once per run of such
// refusals (a full disk refuses the decider at every sample).
func (a *agreement) refused(err error) {
	var sr stateRefusal
	if errors.As(err, &sr) {
		if a.unwritable {
			return
		}
		a.unwritable = true
		a.logf("not taking the steps decided for this instance while the state file cannot be written: %v", err)
		return
	}
	a.logf("not taking the step decided for this instance: %v", err)
}

// exec executes decision st for this instance: the coordinator's Step
// outcome for our own proposal, or another tenant's tenant_step. It
// refuses a claim older than api.ClaimTTL, one older than a decision it
// already executed, and a step it cannot take; it then confirms the claim
// (which fails if the decider gave it up) and only then asks for the
// step. shared says whether other tenants took part (the detail names
// them).
func (a *agreement) exec(st api.TenantStep, shared bool, t core.Tenant) (api.TenantDecision, []core.Input, error) {
	if !t.Coordinated {
		return api.TenantDecision{}, nil, fmt.Errorf("%s takes no part in shared decisions (observe mode or scope = \"process\")", t.Name)
	}
	if age := t.Now.Sub(time.Unix(0, st.At)); age >= api.ClaimTTL {
		return api.TenantDecision{}, nil, fmt.Errorf("decision %d of GPU %s is %s old; claims expire after %s", st.Seq, st.GPU, age.Round(time.Millisecond), api.ClaimTTL)
	}
	if st.Seq <= a.executed[st.GPU] {
		return api.TenantDecision{}, nil, fmt.Errorf("already executed decision %d of GPU %s", a.executed[st.GPU], st.GPU)
	}
	if !t.Watches(st.GPU) {
		return api.TenantDecision{}, nil, fmt.Errorf("%s does not watch GPU %s", t.Name, st.GPU)
	}
	if !t.Steady {
		return api.TenantDecision{}, nil, fmt.Errorf("instance is %s; try again once it runs", t.State)
	}
	to := t.Level + 1
	if st.Kind == api.KindUp {
		to = t.Level - 1
	}
	if to < 0 || to >= len(t.Profiles) {
		return api.TenantDecision{}, nil, fmt.Errorf("already at the %s profile %s", map[bool]string{true: "first", false: "last"}[to < 0], t.Profiles[t.Level])
	}
	// A step whose state file cannot be written would not happen after
	// the confirmation, and the GPU would hold for our grace for nothing:
	// refuse, and the decider asks the next tenant.
	if err := t.Writable(); err != nil {
		return api.TenantDecision{}, nil, stateRefusal{err}
	}
	if a.unwritable {
		a.unwritable = false
		a.logf("the state file can be written again: taking the steps decided for this instance")
	}
	d, err := a.c.Confirm(st.GPU, st.Seq, t.Grace)
	if err != nil {
		return api.TenantDecision{}, nil, err
	}
	d.Kind = st.Kind
	a.executed[st.GPU] = st.Seq
	a.markSeen(st.GPU, st.Seq)
	why := ""
	if shared || st.By != t.Name {
		why = fmt.Sprintf("shared GPU %s: %s (seen by %s, watermark %.2f); this instance ranks first", st.GPU, core.ReasonOfKind(st.Kind).Text(), st.By, st.Watermark)
	}
	a.holdUntil = t.Now.Add(t.Grace)
	return d, []core.Input{core.Peer{Now: t.Now, Reason: core.ReasonOfKind(st.Kind), Why: why, Ratio: t.Ratio, ETA: t.ETA}}, nil
}

// Note records a decision executed on a GPU we watch (another tenant's,
// or the one an outcome of our proposal reports): a yield (once per
// decision; core.Yielded restarts the sustain timer), and no step is
// proposed before its grace has passed.
//
// An observing tenant notes them too: it takes no part in the decision,
// but another tenant's step is its yield like anyone's, and what it would
// have done waits for that step's grace (Held).
func (a *agreement) Note(d api.TenantDecision, t core.Tenant) []core.Input {
	if !t.Notes || !t.Watches(d.GPU) || a.seen[d.GPU][d.Seq] {
		return nil
	}
	a.markSeen(d.GPU, d.Seq)
	if until := time.Unix(0, d.At).Add(time.Duration(d.GraceSeconds * float64(time.Second))); until.After(a.holdUntil) {
		a.holdUntil = until
	}
	return []core.Input{core.Yielded{GPU: d.GPU, To: d.To, Kind: d.Kind, Self: d.To == t.Name, Ratio: t.Ratio}}
}

// markSeen remembers seq, keeping the newest 64 seqs per GPU.
func (a *agreement) markSeen(gpu string, seq int64) {
	m := a.seen[gpu]
	if m == nil {
		m = map[int64]bool{}
		a.seen[gpu] = m
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
