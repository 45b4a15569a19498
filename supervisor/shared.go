package supervisor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// Coordinator is how the supervisor agrees with the other tenants of its
// GPUs (package tenants implements it). Its words are the supervisor's
// (api.Proposal, api.Outcome, ...), so this package imports nothing of
// the one that implements it. Decide, ClaimStart, Admit, Void and
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

// sharedState is the shared-GPU agreement: an actor beside the loop, with
// state of its own. The loop hands it inputs (a proposal's kind, the
// coordinator's outcome, another tenant's step or decision) together with
// the facts of the moment (peerFacts); the coordinator's slow answers come
// back on outcomes and starts; and what the agreement asks of the
// instance comes back as a peerOutcome, which the loop performs (a step
// through the decision core's entry point, a journal line). It never
// reads or changes the loop's fields, so the loop's own rules and the
// agreement cannot tangle.
type sharedState struct {
	c    Coordinator // nil: no other tenants to agree with
	logf func(format string, args ...any)

	outcomes chan sharedResult

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
	// unwritable: a step decided for this instance was refused because
	// its state file cannot be written, and that was logged; the next
	// step whose state file can be written says so (once per run of
	// refusals: the decider asks again at every sample).
	unwritable bool
	// leasesPublished: the leases were published once the GPUs were known.
	leasesPublished bool

	// startClaim is the one start at a time (shared_start.go), embedded so
	// that the loop's files end a start and read its answers as before.
	startClaim
}

type sharedResult struct {
	p api.Proposal
	o api.Outcome
}

func newShared(c Coordinator, logf func(format string, args ...any), starting *atomic.Bool) sharedState {
	return sharedState{c: c, logf: logf, outcomes: make(chan sharedResult, 1),
		executed: map[string]int64{}, seen: map[string]map[int64]bool{}, quietUntil: map[bool]time.Time{},
		startClaim: startClaim{c: c, logf: logf, starting: starting, starts: make(chan api.StartOutcome, 1)}}
}

// peerFacts are the loop's facts an input to the agreement is judged on,
// read once when the input arrives.
type peerFacts struct {
	now  time.Time
	name string
	// coordinated: this instance takes part in decisions; notes: it
	// journals the other tenants' decisions (see sharedState.coordinated
	// and notesDecisions).
	coordinated, notes bool
	ratio              float64
	devices            []gpu.Device // the watched GPUs, newest sample
	// canStep: a child runs and nothing else (a stop, a restart, an
	// action) is under way; state names the instance's state otherwise.
	canStep bool
	state   string
	level   int
	levels  []string // the profiles' names
	grace   time.Duration
	sustain time.Duration
	// writable checks that the state file can be written (a step that
	// could not write it would not happen).
	writable func() error
	// wm and eta say why a step the instance's own rules would have
	// decided happens (core.Reason.Why).
	wm  policy.Watermark
	eta float64
	// self is the rest of what the other tenants are told of this
	// instance (tenant).
	self tenantFacts
}

func (f peerFacts) watches(uuid string) bool {
	for _, d := range f.devices {
		if d.UUID == uuid {
			return true
		}
	}
	return false
}

// peerOutcome is what an input to the agreement asks of the instance, in
// the order the loop performs it: journal a yield (and print log), restart
// the sustain timer (gap), step, raise the rate-limited `critical` alarm
// (nobody), and then tell the other tenants (announce).
type peerOutcome struct {
	yield    *api.Event
	log      string
	gap      bool
	step     *peerStep
	nobody   *nobodyCan
	announce *announcement
}

// peerStep is a decision this instance carries out: kind, and why ("":
// the instance's own rules decided, and their detail says why).
type peerStep struct{ kind, why string }

// nobodyCan: no tenant of shared GPU gpu (or, when !shared, not this
// instance alone) can step lower.
type nobodyCan struct {
	gpu    string
	shared bool
}

// announcement tells the tenants at peers of decision d.
type announcement struct {
	d     api.TenantDecision
	peers []string
}

// held reports whether a decision's cadence holds the GPU at now.
func (t *sharedState) held(now time.Time) bool { return now.Before(t.holdUntil) }

// propose takes the verdict of a coordinated instance's rules (kind, ""
// for none; gpu the worst watched GPU at ratio) to the coordinator, off
// the loop; the outcome comes back on outcomes. self is asked only when a
// proposal is made.
func (t *sharedState) propose(ctx context.Context, done <-chan struct{}, now time.Time, kind, gpu string, ratio float64, self func() api.TenantInfo) {
	if kind == "" || now.Before(t.holdUntil) || now.Before(t.quietUntil[api.IsDown(kind)]) || gpu == "" {
		return
	}
	p := api.Proposal{GPU: gpu, Kind: kind, Watermark: ratio, Self: self()}
	t.proposing = true
	c, out := t.c, t.outcomes
	go func() {
		o := c.Decide(ctx, p)
		select {
		case out <- sharedResult{p, o}:
		case <-done:
		}
	}()
}

// outcome acts on what the coordinator concluded about a proposal.
func (t *sharedState) outcome(r sharedResult, f peerFacts) peerOutcome {
	t.proposing = false
	o := r.o
	if o.Kind != api.OutcomeFailed {
		t.failNoted = false
	}
	switch o.Kind {
	case api.OutcomeStep:
		d, out, err := t.exec(o.Claim, o.Shared, f)
		if err != nil {
			t.refused(err)
			c := t.c
			go c.Void(o.Claim.GPU, o.Claim.Seq)
			return peerOutcome{}
		}
		if len(o.Peers) > 0 {
			out.announce = &announcement{d, o.Peers}
		}
		return out
	case api.OutcomeYield:
		return t.note(o.Record, f)
	case api.OutcomeHold:
		if o.Record.Seq > 0 {
			return t.note(o.Record, f)
		}
	case api.OutcomeNoCandidate:
		down := api.IsDown(r.p.Kind)
		t.quietUntil[down] = f.now.Add(max(f.sustain, time.Second))
		if down {
			return peerOutcome{nobody: &nobodyCan{gpu: r.p.GPU, shared: o.Shared}}
		}
	case api.OutcomeFailed:
		if !t.failNoted {
			t.failNoted = true
			t.logf("cannot agree with the other tenants of GPU %s (%v); deciding alone", r.p.GPU, o.Err)
		}
		if f.canStep {
			return peerOutcome{step: &peerStep{kind: r.p.Kind}}
		}
	}
	return peerOutcome{}
}

// stateRefusal is exec's refusal of a step whose state file cannot be
// written; its text is the write's error, as the decider is told.
type stateRefusal struct{ err error }

func (e stateRefusal) Error() string { return e.err.Error() }
func (e stateRefusal) Unwrap() error { return e.err }

// refused logs why a step decided for this instance is not taken: every
// time, but a state file that cannot be written once per run of such
// refusals (a full disk refuses the decider at every sample).
func (t *sharedState) refused(err error) {
	var sr stateRefusal
	if errors.As(err, &sr) {
		if t.unwritable {
			return
		}
		t.unwritable = true
		t.logf("not taking the steps decided for this instance while the state file cannot be written: %v", err)
		return
	}
	t.logf("not taking the step decided for this instance: %v", err)
}

// announce tells the other tenants of a decision executed here.
func (t *sharedState) announce(a announcement) { t.c.Announce(a.d, a.peers) }

// exec executes decision st for this instance: the coordinator's Step
// outcome for our own proposal, or another tenant's tenant_step. It
// refuses a claim older than api.ClaimTTL, one older than a decision it
// already executed, and a step it cannot take; it then confirms the claim
// (which fails if the decider gave it up) and only then asks for the
// step. shared says whether other tenants took part (the detail names
// them).
func (t *sharedState) exec(st api.TenantStep, shared bool, f peerFacts) (api.TenantDecision, peerOutcome, error) {
	if t.c == nil || !f.coordinated {
		return api.TenantDecision{}, peerOutcome{}, fmt.Errorf("%s takes no part in shared decisions (observe mode or scope = \"process\")", f.name)
	}
	if age := f.now.Sub(time.Unix(0, st.At)); age >= api.ClaimTTL {
		return api.TenantDecision{}, peerOutcome{}, fmt.Errorf("decision %d of GPU %s is %s old; claims expire after %s", st.Seq, st.GPU, age.Round(time.Millisecond), api.ClaimTTL)
	}
	if st.Seq <= t.executed[st.GPU] {
		return api.TenantDecision{}, peerOutcome{}, fmt.Errorf("already executed decision %d of GPU %s", t.executed[st.GPU], st.GPU)
	}
	if !f.watches(st.GPU) {
		return api.TenantDecision{}, peerOutcome{}, fmt.Errorf("%s does not watch GPU %s", f.name, st.GPU)
	}
	if !f.canStep {
		return api.TenantDecision{}, peerOutcome{}, fmt.Errorf("instance is %s; try again once it runs", f.state)
	}
	to := f.level + 1
	if st.Kind == api.KindUp {
		to = f.level - 1
	}
	if to < 0 || to >= len(f.levels) {
		return api.TenantDecision{}, peerOutcome{}, fmt.Errorf("already at the %s profile %s", map[bool]string{true: "first", false: "last"}[to < 0], f.levels[f.level])
	}
	// A step whose state file cannot be written would not happen after
	// the confirmation, and the GPU would hold for our grace for nothing:
	// refuse, and the decider asks the next tenant.
	if err := f.writable(); err != nil {
		return api.TenantDecision{}, peerOutcome{}, stateRefusal{err}
	}
	if t.unwritable {
		t.unwritable = false
		t.logf("the state file can be written again: taking the steps decided for this instance")
	}
	d, err := t.c.Confirm(st.GPU, st.Seq, f.grace)
	if err != nil {
		return api.TenantDecision{}, peerOutcome{}, err
	}
	d.Kind = st.Kind
	t.executed[st.GPU] = st.Seq
	t.markSeen(st.GPU, st.Seq)
	why := ""
	if shared || st.By != f.name {
		why = fmt.Sprintf("shared GPU %s: %s (seen by %s, watermark %.2f); this instance ranks first", st.GPU, kindText(st.Kind), st.By, st.Watermark)
	}
	t.holdUntil = f.now.Add(f.grace)
	return d, peerOutcome{step: &peerStep{kind: st.Kind, why: why}}, nil
}

// note records a decision another tenant executed on a GPU we watch: a
// yield (once per decision), the sustain timer restarts, and no step is
// proposed before its grace has passed.
//
// An observing tenant notes them too: it takes no part in the decision, but
// another tenant's step is its yield like anyone's, and what it would
// have done waits for that step's grace (see sharedState.observeHeld).
func (t *sharedState) note(d api.TenantDecision, f peerFacts) peerOutcome {
	if !f.notes || !f.watches(d.GPU) || t.seen[d.GPU][d.Seq] {
		return peerOutcome{}
	}
	t.markSeen(d.GPU, d.Seq)
	// A step elsewhere is like a gap here: `sustain` of fresh readings
	// again before the next proposal.
	out := peerOutcome{gap: true}
	if d.To != f.name {
		out.yield = &api.Event{Event: api.EventYield, To: d.To, GPU: d.GPU, Reason: kindReason(d.Kind), Watermark: f.ratio,
			Detail: fmt.Sprintf("%s: %s by %s, which ranks first on the shared GPU", d.GPU, kindText(d.Kind), d.To)}
		out.log = fmt.Sprintf("yield: %s takes the %s on shared GPU %s", d.To, kindText(d.Kind), d.GPU)
	}
	if until := time.Unix(0, d.At).Add(time.Duration(d.GraceSeconds * float64(time.Second))); until.After(t.holdUntil) {
		t.holdUntil = until
	}
	return out
}

// markSeen remembers seq, keeping the newest 64 seqs per GPU.
func (t *sharedState) markSeen(gpu string, seq int64) {
	m := t.seen[gpu]
	if m == nil {
		m = map[int64]bool{}
		t.seen[gpu] = m
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

// published tells the other tenants what this instance is; it reports
// whether the leases are to be published now: once, when the GPUs are
// first known (a file left by an earlier instance of this name, killed,
// must not count as this one's leases).
func (t *sharedState) published(info api.TenantInfo) bool {
	if t.c == nil {
		return false
	}
	t.c.Publish(info)
	if t.leasesPublished || len(info.GPUs) == 0 {
		return false
	}
	t.leasesPublished = true
	return true
}
