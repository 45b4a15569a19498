package supervisor

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/admission"
	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// loop is the state of one Run. Only the Run goroutine touches it.
type loop struct {
	s *Supervisor
	// cfg has no Policy: pol is the policy in force, which applyReload
	// replaces, so every reader in the loop sees the reloaded one.
	cfg  Config
	deps Deps
	pol  *policy.Policy
	ctx  context.Context

	state string
	level int
	core  core.State // the decision core's own state: the watermark timers, the restart budget

	ledger    *admission.Ledger
	plan      *restartPlan // a restart gpuguard asked for is under way, until the next start
	childLife              // the child's lifecycle: the children so far, the one running, a stop, the next start, the end (child.go)
	stateFile stateFile    // writes the state file; its seq and its failing writes (statewrite.go)
	fitTeller              // the start-up line and the newest fit, told once (fit.go)

	pending []chan response

	rooms  // the rooms around the loop, one job each (rooms.go)
	latest // the newest good reading and its watermark, for status, admission and the door (child.go)

	shared sharedState // agreeing with the other tenants of shared GPUs
}

// restartPlan is a restart that gpuguard itself started (a step into a
// profile with live = false, a critical restart, a manual step).
type restartPlan struct {
	level   int
	reason  string // watermark | critical | manual | recovered | reload
	from    string // the profile the stopped child runs in
	sleep   bool   // no restart: the instance sleeps in level (sleep.go)
	replies []chan response
}

// timer is a restartable one-shot timer whose channel is nil when unarmed,
// so a select on it blocks forever.
type timer struct {
	t *time.Timer
	C <-chan time.Time
}

func (t *timer) arm(d time.Duration) {
	t.stop()
	t.t = time.NewTimer(d)
	t.C = t.t.C
}

func (t *timer) stop() {
	if t.t != nil {
		t.t.Stop()
	}
	t.t, t.C = nil, nil
}

func newLoop(s *Supervisor) *loop {
	cfg := s.cfg
	cfg.Policy = nil // the loop reads pol, which a reload replaces
	return &loop{
		s: s, cfg: cfg, deps: s.deps, pol: s.pol.Load(),
		state: api.StateStarting, level: s.cfg.StartLevel,
		childLife: childLife{history: history{lastExit: "none"}, startWait: startWait{target: s.cfg.StartLevel}},
		stateFile: stateFile{path: s.cfg.StatePath, write: s.deps.WriteState, logf: s.deps.Logf},
		ledger:    s.ledger, shared: newShared(s.deps.Coordinator, s.deps.Logf, &s.starting),
		rooms: rooms{door: doorLink{d: s.deps.Door}, pace: newPacer(s.deps.Probe, s.cfg.ProbeTimeout, s.pol.Load().Watch.Interval),
			out: newReporter(s.cfg.Name, s.deps.Observers, s.deps.Notifier)},
	}
}

// stoppedTimer is a timer that has not been armed.
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func (l *loop) run(ctx context.Context, signals <-chan os.Signal) (int, error) {
	l.ctx = ctx
	go l.pace.smp.run(ctx, l.s.done)
	defer l.pace.smp.next.Stop()
	defer l.pace.hung.Stop()
	l.pace.armNow() // the first sample is due at once
	var watchdog <-chan time.Time
	if n := l.deps.Notifier; n != nil && n.WatchdogInterval() > 0 {
		t := time.NewTicker(n.WatchdogInterval() / 2)
		defer t.Stop()
		watchdog = t.C
		_ = n.Watchdog()
	}
	defer l.backoff.stop()
	defer l.stopWait.stop()
	defer l.door.limit.stop()

	if !l.startAsleep() {
		l.enterWaiting(l.target, nil)
	}
	// A stop queued before Run (gpuguard listens from before its backend
	// opens) came while no child ran: it goes first, not by the select's
	// coin toss against a first sample that would start one.
	select {
	case sig := <-signals:
		if s, ok := sig.(syscall.Signal); ok {
			l.onStopSignal(s)
			l.publishSnapshot()
		}
	default:
	}
	ctxDone := ctx.Done()
	for !l.finished {
		l.pace.wake() // last, so that the sample it asks for runs first
		select {
		case r := <-l.pace.smp.out:
			l.onSample(r)
			l.s.tasks.poke() // a deferred task may fit now
		case now := <-l.pace.hung.C:
			l.onHung(now)
		case f := <-l.deps.Faults:
			l.faults.observe(f, l)
		case <-l.childDone():
			l.onExit()
		case <-l.backoff.C:
			l.backoff.stop()
			l.doAll(l.decide(core.BackoffOver{Target: l.target}), nil)
		case <-l.stopWait.C:
			l.stopWait.stop()
			l.doAll(l.decide(core.StopWaitOver{Running: l.child != nil}), nil)
		case <-l.door.drain:
			l.door.drained(false, l.child, l.pol.Restart.StopTimeout, &l.stopWait, l)
		case <-l.door.limit.C:
			l.door.drained(true, l.child, l.pol.Restart.StopTimeout, &l.stopWait, l)
		case d := <-l.acts.out:
			l.onActionsDone(d)
		case <-l.s.wanted:
			l.onWanted()
		case <-watchdog:
			_ = l.deps.Notifier.Watchdog()
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok {
				l.onStopSignal(s)
			}
		case <-ctxDone:
			ctxDone = nil
			l.onStopSignal(syscall.SIGTERM)
		case req := <-l.s.reqs:
			l.onRequest(req)
		case r := <-l.shared.outcomes:
			l.onOutcome(r)
		case o := <-l.shared.starts:
			l.onStartClaim(o)
		}
		l.publishSnapshot()
	}
	for _, p := range l.pending {
		p <- response{err: errShutdown}
	}
	return l.code, l.err
}

func (l *loop) onRequest(r request) {
	switch r.op {
	case opStep:
		l.manualStep(r)
	case opReserve:
		r.reply <- response{decision: l.reserve(r)}
	case opRelease:
		if !l.ledger.Release(r.lease) {
			r.reply <- response{err: errUnknownLease}
			return
		}
		r.reply <- response{}
		// The headroom is free again, and a task's released lease frees
		// the one-at-a-time slot.
		l.s.tasks.leaseReleased(r.lease)
	case opReload:
		l.applyReload(r)
	case opHealthy:
		l.onHealthy(r.gen)
	default:
		l.onSharedRequest(r)
	}
}

func (l *loop) reserve(r request) admission.Decision {
	req := r.reserve
	now := time.Now()
	l.ledger.Expire(now)
	var usage []admission.GPUUsage
	// While the probe fails the last sample is stale: promise nothing.
	if l.haveSample && !l.health.down() {
		for _, d := range l.lastSample.Devices {
			usage = append(usage, admission.GPUUsage{Used: d.Used, Limit: l.pol.Limit(d.Total), Leased: r.others[d.UUID]})
		}
	}
	pending := l.core.Rules.StepPending() || l.plan != nil || l.child == nil
	var d admission.Decision
	if r.refuse != "" {
		d = admission.Refuse(req, r.refuse)
	} else {
		d = l.ledger.Decide(now, req, usage, l.pol.Watermark.High, pending)
	}
	if !r.quiet || d.Decision == admission.DecisionGPU {
		l.emit(api.Event{Event: api.EventAdmission, Decision: d.Decision, Bytes: req.Bytes,
			Priority: req.Priority, Tool: admission.CutTool(req.Tool), Lease: d.Lease, Reason: d.Reason})
	}
	return d
}
