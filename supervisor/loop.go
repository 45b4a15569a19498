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
	"github.com/gpuguard/gpuguard/supervisor/sense"
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

	core   core.State // the decision core's own state: the rules' timers, the restart budget, the start claim (effects.go)
	ledger *admission.Ledger
	life   lifecycle // the child's lifecycle and what stands in front of it: the state file, the front door (life.go)
	fit    fitTeller // the start-up line and the newest fit, told once (fitline.go)
	latest latest    // the newest good reading and its watermark, for status, admission and the door (child.go)
	peers  Peers     // the other tenants of the watched GPUs (peers.go); nil: none
	self   self      // this instance as the other tenants see it (peers.go)

	// The rooms around the loop, each holding its own state and given
	// what it needs rather than a pointer to the loop.
	pace   *sense.Pacer // the sampling schedule and the sampler (package sense)
	health sense.Health // a run of failed probe calls
	faults sense.Faults // Xid events and the GPUs they left faulted
	minute sense.Minute // the watermark samples of this minute, for its record
	out    reporter     // events and the status line, outward (reporter.go)
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

// armed reports whether the timer is set and has not been stopped.
func (t *timer) armed() bool { return t.C != nil }

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
		s: s, cfg: cfg, deps: s.deps, pol: s.pol.Load(), peers: s.deps.Peers,
		life: lifecycle{state: api.StateStarting, level: s.cfg.StartLevel, hist: history{lastExit: "none"},
			wait: startWait{target: s.cfg.StartLevel}, notifier: s.deps.Notifier,
			file: stateFile{path: s.cfg.StatePath, write: s.deps.WriteState, logf: s.deps.Logf},
			door: doorLink{d: s.deps.Door}},
		ledger: s.adm.ledger,
		pace:   sense.NewPacer(s.deps.Probe, s.cfg.ProbeTimeout, s.pol.Load().Watch.Interval, s.deps.Alarm),
		out:    newReporter(s.cfg.Name, s.deps.Observers, s.deps.Notifier),
	}
	l.life.out, l.life.sampleNow, l.life.snapshot = &l.out, l.pace.SampleNow, l.publishSnapshot
	l.self = self{name: s.cfg.Name, pid: s.snap.Load().status.PID, observe: s.cfg.Observe, peers: l.peers != nil,
		canSleep: s.deps.Door != nil, started: s.started, life: &l.life, latest: &l.latest, act: &s.act, pace: l.pace}
	l.out.publisher = s.deps.Publisher
	l.out.log = s.deps.Logf
	l.out.inForce = func() (string, int) { return l.pol.Profiles[l.life.level].Name, l.life.level }
	return l
}

func (l *loop) run(ctx context.Context, signals <-chan os.Signal) (int, error) {
	l.ctx = ctx
	go l.pace.Run(ctx, l.s.done)
	defer l.pace.Stop()
	l.pace.ArmNow() // the first sample is due at once
	var watchdog <-chan time.Time
	if n := l.deps.Notifier; n != nil && n.WatchdogInterval() > 0 {
		t := time.NewTicker(n.WatchdogInterval() / 2)
		defer t.Stop()
		watchdog = t.C
		_ = n.Watchdog()
	}
	defer l.life.wait.backoff.stop()
	defer l.life.stop.stopWait.stop()
	defer l.life.door.limit.stop()

	l.feed(core.Begin{}, nil)
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
	var outcomes <-chan api.Outcome
	var starts <-chan api.StartOutcome
	var rooms <-chan api.RoomOutcome
	if l.peers != nil {
		outcomes, starts, rooms = l.peers.Outcomes(), l.peers.Starts(), l.peers.RoomAnswers()
	}
	ctxDone := ctx.Done()
	for !l.life.end.finished {
		l.pace.Wake() // last, so that the sample it asks for runs first
		select {
		case r := <-l.pace.Results():
			l.onSample(r)
			l.s.tasks.Poke() // a deferred task may fit now
		case now := <-l.pace.Hung():
			l.onHung(now)
		case f := <-l.deps.Faults:
			l.faults.Observe(f, &l.out)
		case <-l.life.run.childDone():
			l.onExit()
		case <-l.life.wait.backoff.C:
			l.life.wait.backoff.stop()
			l.feed(core.BackoffOver{Target: l.life.wait.target, Why: l.life.wait.why}, nil)
		case <-l.life.stop.stopWait.C:
			l.life.stop.stopWait.stop()
			l.feed(core.StopWaitOver{Running: l.life.run.child != nil}, nil)
		case <-l.life.door.drain:
			l.life.door.drained(false, l.life.run.child, l.pol.Restart.StopTimeout, &l.life.stop.stopWait, &l.out)
		case <-l.life.door.limit.C:
			l.life.door.drained(true, l.life.run.child, l.pol.Restart.StopTimeout, &l.life.stop.stopWait, &l.out)
		case d := <-l.life.acts.out:
			l.onActionsDone(d)
		case <-l.s.wanted:
			l.feed(l.wakeFacts(time.Now(), true, time.Time{}), nil)
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
		case o := <-outcomes:
			for _, in := range l.peers.Outcome(o, l.self.tenant(time.Now(), l.pol)) {
				l.feed(in, nil)
			}
			l.peers.Announce()
		case o := <-rooms:
			l.feed(core.RoomAnswer{Now: time.Now(), Outcome: o}, nil)
		case o := <-starts:
			l.feed(core.ClaimAnswer{Now: time.Now(), Outcome: o, Waiting: l.life.state == api.StateWaiting,
				Asleep: l.life.state == api.StateAsleep, Stopping: l.life.stop.stopping || l.life.end.finished}, nil)
		}
		l.publishSnapshot()
	}
	return l.life.end.code, l.life.end.err
}

func (l *loop) onRequest(r request) {
	switch r.op {
	case opStep:
		l.manualStep(r)
	case opReserve:
		var usage []admission.GPUUsage
		if s, ok := l.latest.good(l.health.Down()); ok {
			for _, d := range s.Devices {
				usage = append(usage, admission.GPUUsage{Used: d.Used, Limit: l.pol.Limit(d.Total), Leased: r.others[d.UUID]})
			}
		}
		pending := l.core.StepPending() || l.life.plan != nil || l.life.run.child == nil
		d, ev := reserve(l.ledger, r, time.Now(), usage, l.pol.Watermark.High, pending)
		if ev != nil {
			l.out.Emit(*ev)
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
		l.s.tasks.LeaseReleased(r.lease)
	case opReload:
		l.applyReload(r)
	case opHealthy:
		l.onHealthy(r.gen)
	case opEmit:
		l.out.Emit(r.event)
		r.reply <- response{}
	case opReady:
		l.feed(core.Ready{Why: "the child said ready"}, nil)
		r.reply <- response{}
	case opTenantStep, opTenantDecision:
		l.onTenant(r)
	case opTenantSleep:
		l.onTenantSleep(r)
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
