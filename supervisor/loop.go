package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/admission"
	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/exitcode"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/trend"
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

	state    string
	level    int
	target   int // the level the next start aims for
	restarts int
	starts   int    // children launched so far
	lastExit string // none | oom | crash | watermark | reload | gpu_fault
	seq      int
	stateW   stateWrites // the state file's last reason, and a failing run of writes (statewrite.go)
	// notifiedAt is when the current child was last sent the notify
	// signal (zero: never), and notifiedSig which one (a reload may change
	// [notify] signal since), to tell its death by that signal.
	notifiedAt  time.Time
	notifiedSig syscall.Signal

	child      Child
	childStart time.Time
	childTree  map[int]bool // the child's processes at the last sample
	// stoppingSent: STOPPING=1 went out (it is sent once).
	stoppingSent bool

	rules   watermarkRules
	budget  restartBudget
	ledger  *admission.Ledger
	plan    *restartPlan // a restart gpuguard asked for is under way, until the next start
	pending []chan response

	stopping  bool
	stopSig   syscall.Signal
	waitSince time.Time    // start of the waiting state
	release   map[int]bool // dead child's processes whose memory must go
	waitNoted bool

	// Sampling (sense.go): the next call is due at next, then every
	// period; hung fires when a call has not returned by ProbeTimeout
	// after it was due. soon: the next sample is wanted at once.
	smp        *sampler
	next       time.Time
	period     time.Duration
	soon       bool
	hung       *time.Timer
	sense      sensor
	fc         trend.Forecast // after the newest good sample
	probeHung  bool           // the call in flight ran past ProbeTimeout (and was counted)
	haveSample bool
	lastSample gpu.Sample
	ratio      float64
	statusText string

	// A run of failed probe calls: no GPU reading since probeDownSince.
	probeDownSince time.Time // zero: the last call succeeded
	probeErr       string    // the newest failure, "" when none
	reportedErr    string    // the last failure journaled ...
	reportedAt     time.Time // ... and when
	unreported     int       // failed calls not journaled since then
	streakReported bool      // this run of failures has a journal line
	lostErr        error     // on_gpu_lost = "stop" is stopping the child

	faults gpuFaults     // Xid events and the GPUs they left faulted
	minute minuteSummary // the watermark samples of this minute, for its record

	backoff  timer
	stopWait timer

	shared sharedState // agreeing with the other tenants of shared GPUs
	door   doorState   // the front door (door.go)
	acts   actionState // server actions (actions.go)
	wake   wakeState   // waking on request, sleeping when idle (wake.go)

	lastEvent   *api.Event
	lastFit     *api.Event // the newest fit event, for status
	startup     string     // the start-up line, told before the first fit
	startupSaid bool
	pendingFit  func(time.Time) // tells the fit of the launch under way, once the child runs
	finished    bool
	code        int
	err         error
}

// errProbeHung is the failure of a probe call that ran past ProbeTimeout.
var errProbeHung = errors.New("GPU probe hung")

// reasonGPULost is the giveup event's reason under on_gpu_lost = "stop".
const reasonGPULost = "gpu_lost"

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
		state: api.StateStarting, level: s.cfg.StartLevel, target: s.cfg.StartLevel,
		lastExit: "none", ledger: s.ledger, shared: newShared(s.deps.Coordinator, s.deps.Logf, &s.starting),
		smp: newSampler(s.deps.Probe, s.cfg.ProbeTimeout, s.pol.Load().Watch.Interval), hung: stoppedTimer(),
		period: s.pol.Load().Watch.Interval, sense: new(trend.Tracker),
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
	go l.smp.run(ctx, l.s.done)
	defer l.smp.next.Stop()
	defer l.hung.Stop()
	l.armNow() // the first sample is due at once
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
		select {
		case r := <-l.smp.out:
			l.onSample(r)
			l.s.tasks.poke() // a deferred task may fit now
		case now := <-l.hung.C:
			l.onHung(now)
		case f := <-l.deps.Faults:
			l.onFault(f)
		case <-l.childDone():
			l.onExit()
		case <-l.backoff.C:
			l.backoff.stop()
			l.enterWaiting(l.target, l.release)
		case <-l.stopWait.C:
			l.stopWait.stop()
			l.deps.Logf("child did not exit within %s; killing its process group", l.pol.Restart.StopTimeout)
			if l.child != nil {
				_ = l.child.Kill()
			}
		case <-l.door.drain:
			l.drained(false)
		case <-l.door.limit.C:
			l.drained(true)
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

func (l *loop) childDone() <-chan struct{} {
	if l.child == nil {
		return nil
	}
	return l.child.Done()
}

// probeFailed records a failed probe call (counted) or one still hung
// (not counted again). There is no reading from since on: the watermark
// timers restart, so a step needs `sustain` of fresh data after the gap.
// The journal gets a line when the failure changes and at most one a
// minute otherwise (a lost GPU, or one that flaps, would write five a
// second); that line counts the failures it stands for.
func (l *loop) probeFailed(now, since time.Time, msg string, counted bool) {
	l.rules.gap()
	if l.probeDownSince.IsZero() {
		l.probeDownSince = since
	}
	l.probeErr = msg
	if counted {
		l.unreported++
	}
	if msg == l.reportedErr && now.Sub(l.reportedAt) < time.Minute {
		return
	}
	detail := msg
	if n := l.unreported - 1; n > 0 {
		detail = fmt.Sprintf("%s (%d more failed probe calls since the last report)", msg, n)
	}
	l.deps.Logf("GPU probe failed: %s (the child keeps running; no decisions without data)", detail)
	l.emit(api.Event{Event: api.EventProbeError, Detail: detail})
	l.reportedErr, l.reportedAt, l.unreported, l.streakReported = msg, now, 0, true
}

// probeRecovered ends a run of failures.
func (l *loop) probeRecovered(now time.Time) {
	if l.probeDownSince.IsZero() {
		return
	}
	if l.streakReported {
		l.deps.Logf("GPU probe recovered after %s without a reading", now.Sub(l.probeDownSince).Round(time.Millisecond))
	}
	l.probeDownSince, l.probeErr, l.streakReported = time.Time{}, "", false
}

// checkLost applies on_gpu_lost = "stop": once no reading has succeeded
// for lost_after, stop the child as gpuguard's own stops do (stop_signal,
// then SIGKILL to its group after stop_timeout) and exit 1. Not the
// child's status: the child did not fail, and the status it leaves after
// a stop signal (often 0) would tell the service manager that all is well.
func (l *loop) checkLost(now time.Time) {
	w := l.pol.Watch
	if w.OnGPULost != policy.OnGPULostStop || l.probeDownSince.IsZero() || l.finished || l.stopping {
		return
	}
	down := now.Sub(l.probeDownSince)
	if down < w.LostAfter {
		return
	}
	l.lostErr = fmt.Errorf("no GPU reading for %s (on_gpu_lost = \"stop\"): %s", down.Round(time.Millisecond), l.probeErr)
	l.emit(api.Event{Event: api.EventGiveUp, Reason: reasonGPULost, Detail: l.lostErr.Error()})
	if l.child == nil {
		l.state = api.StateFatal
		l.finish(exitcode.Failure, l.lostErr)
		return
	}
	l.deps.Logf("GPU lost: stopping the child (%v)", l.lostErr)
	l.stopping, l.stopSig = true, l.pol.Restart.StopSignal
	l.state = api.StateStopping
	l.notifyStopping()
	if l.plan == nil { // else the stop signal is already on its way
		l.stopChild(l.pol.Restart.StopSignal)
	}
	l.failPlan()
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
	if l.haveSample && l.probeDownSince.IsZero() {
		for _, d := range l.lastSample.Devices {
			usage = append(usage, admission.GPUUsage{Used: d.Used, Limit: l.pol.Limit(d.Total), Leased: r.others[d.UUID]})
		}
	}
	pending := l.rules.stepPending() || l.plan != nil || l.child == nil
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
