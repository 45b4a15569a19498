package supervisor

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
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

	level int
	core  core.State // the decision core's own state: the watermark timers, the restart budget

	ledger    *admission.Ledger
	life      lifecycle // the child's lifecycle: the state, the children so far, the one running, a plan, a stop, the next start, the end (life.go)
	stateFile stateFile // writes the state file; its seq and its failing writes (statewrite.go)
	fit       fitTeller // the start-up line and the newest fit, told once (fit.go)

	pending []chan response

	rooms         // the rooms around the loop, one job each (rooms.go)
	latest latest // the newest good reading and its watermark, for status, admission and the door (child.go)

	shared sharedState // agreeing with the other tenants of shared GPUs
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
	// The loop reads pol, which a reload replaces, and the pacer's probe
	// timeout, which a reload may change: its cfg holds neither.
	cfg.Policy, cfg.ProbeTimeout = nil, 0
	l := &loop{
		s: s, cfg: cfg, deps: s.deps, pol: s.pol.Load(), level: s.cfg.StartLevel,
		life: lifecycle{state: api.StateStarting, hist: history{lastExit: "none"}, wait: startWait{target: s.cfg.StartLevel},
			notifier: s.deps.Notifier},
		stateFile: stateFile{path: s.cfg.StatePath, write: s.deps.WriteState, logf: s.deps.Logf},
		ledger:    s.adm.ledger, shared: newShared(s.deps.Coordinator, s.deps.Logf, &s.adm.starting),
		rooms: rooms{door: doorLink{d: s.deps.Door}, pace: newPacer(s.deps.Probe, s.cfg.ProbeTimeout, s.pol.Load().Watch.Interval),
			out: newReporter(s.cfg.Name, s.deps.Observers, s.deps.Notifier)},
	}
	l.life.sampleNow = l.pace.sampleNow
	l.out.publisher = s.deps.Publisher
	l.out.log = s.deps.Logf
	l.out.inForce = func() (string, int) { return l.pol.Profiles[l.level].Name, l.level }
	return l
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
	defer l.life.wait.backoff.stop()
	defer l.life.stop.stopWait.stop()
	defer l.door.limit.stop()

	if !l.wake.startAsleep(l.sleepView()) {
		l.life.enterWaiting(l.life.wait.target, nil)
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
	for !l.life.end.finished {
		l.pace.wake() // last, so that the sample it asks for runs first
		select {
		case r := <-l.pace.smp.out:
			l.onSample(r)
			l.s.tasks.poke() // a deferred task may fit now
		case now := <-l.pace.hung.C:
			l.onHung(now)
		case f := <-l.deps.Faults:
			l.faults.observe(f, &l.out)
		case <-l.life.run.childDone():
			l.onExit()
		case <-l.life.wait.backoff.C:
			l.life.wait.backoff.stop()
			l.doAll(l.decide(core.BackoffOver{Target: l.life.wait.target}), nil)
		case <-l.life.stop.stopWait.C:
			l.life.stop.stopWait.stop()
			l.doAll(l.decide(core.StopWaitOver{Running: l.life.run.child != nil}), nil)
		case <-l.door.drain:
			l.door.drained(false, l.life.run.child, l.pol.Restart.StopTimeout, &l.life.stop.stopWait, &l.out)
		case <-l.door.limit.C:
			l.door.drained(true, l.life.run.child, l.pol.Restart.StopTimeout, &l.life.stop.stopWait, &l.out)
		case d := <-l.acts.out:
			l.onActionsDone(d)
		case <-l.s.wanted:
			l.wake.onWanted(l.sleepView())
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
			l.shared.onOutcome(r, l.peerFacts(time.Now()), loopFeed{&l.out, l})
		case o := <-l.shared.starts:
			// a live wake claims as a start does (wake.go)
			l.shared.answer(o, l.wake.claimWanted(l.life.state) && !l.life.stop.stopping && !l.life.end.finished, &l.pace)
		}
		l.publishSnapshot()
	}
	for _, p := range l.pending {
		p <- response{err: errShutdown}
	}
	return l.life.end.code, l.life.end.err
}

func (l *loop) onRequest(r request) {
	switch r.op {
	case opStep:
		l.manualStep(r)
	case opReserve:
		var usage []admission.GPUUsage
		if l.latest.haveSample && !l.health.down() {
			for _, d := range l.latest.lastSample.Devices {
				usage = append(usage, admission.GPUUsage{Used: d.Used, Limit: l.pol.Limit(d.Total), Leased: r.others[d.UUID]})
			}
		}
		pending := l.core.Rules.StepPending() || l.life.plan != nil || l.life.run.child == nil
		d, ev := reserve(l.ledger, r, time.Now(), usage, l.pol.Watermark.High, pending)
		if ev != nil {
			l.out.emit(*ev)
		}
		r.reply <- response{decision: d}
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
	case opReady:
		l.life.run.ready = l.life.run.child != nil
		l.shared.request(r, l.peerFacts, loopFeed{&l.out, l})
	default:
		l.shared.request(r, l.peerFacts, loopFeed{&l.out, l})
	}
}

// reserve is the admission decision for r: the ledger's against usage,
// the watched GPUs' newest reading (none while the probe fails: the last
// sample is stale, so nothing is promised), with pending saying whether
// the instance's own memory is about to change (a step pending, a
// restart under way, no child). It returns the admission event to
// journal, nil for a quiet request that was not granted.
func reserve(ledger *admission.Ledger, r request, now time.Time, usage []admission.GPUUsage, high float64, pending bool) (admission.Decision, *api.Event) {
	req := r.reserve
	ledger.Expire(now)
	var d admission.Decision
	if r.refuse != "" {
		d = admission.Refuse(req, r.refuse)
	} else {
		d = ledger.Decide(now, req, usage, high, pending)
	}
	if r.quiet && d.Decision != admission.DecisionGPU {
		return d, nil
	}
	return d, &api.Event{Event: api.EventAdmission, Decision: d.Decision, Bytes: req.Bytes,
		Priority: req.Priority, Tool: admission.CutTool(req.Tool), Lease: d.Lease, Reason: d.Reason}
}
