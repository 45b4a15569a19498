package supervisor

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/admission"
	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// loop is the state of one Run. Only the Run goroutine touches it.
type loop struct {
	s    *Supervisor
	cfg  Config
	deps Deps
	pol  *policy.Policy
	ctx  context.Context

	state    string
	level    int
	target   int // the level the next start aims for
	restarts int
	starts   int    // children launched so far
	lastExit string // none | oom | crash | watermark
	seq      int

	child      Child
	childStart time.Time
	childTree  map[int]bool // the child's processes at the last sample
	readySent  bool

	rules   watermarkRules
	budget  restartBudget
	ledger  *admission.Ledger
	plan    *restartPlan // a restart gpuguard asked for is under way
	pending []chan response

	stopping  bool
	stopSig   syscall.Signal
	waitSince time.Time    // start of the waiting state
	release   map[int]bool // dead child's processes whose memory must go
	waitNoted bool

	samples       chan sampleResult
	sampling      bool
	samplingSince time.Time
	probeHung     bool
	probeErr      string
	probeErrAt    time.Time
	haveSample    bool
	lastSample    gpu.Sample
	ratio         float64
	statusText    string

	backoff  timer
	stopWait timer

	lastEvent *api.Event
	finished  bool
	code      int
	err       error
}

// restartPlan is a restart that gpuguard itself started (a step into a
// profile with live = false, a critical restart, a manual step).
type restartPlan struct {
	level   int
	reason  string // watermark | critical | manual | recovered
	replies []chan response
}

// sampleResult is one probe tick, taken off the loop goroutine.
type sampleResult struct {
	sample gpu.Sample
	err    error
	took   time.Duration
	tree   []int
	forPID int
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
	return &loop{
		s: s, cfg: s.cfg, deps: s.deps, pol: s.cfg.Policy,
		state: api.StateStarting, level: s.cfg.StartLevel, target: s.cfg.StartLevel,
		lastExit: "none", ledger: admission.NewLedger(),
		samples: make(chan sampleResult, 1),
	}
}

func (l *loop) run(ctx context.Context, signals <-chan os.Signal) (int, error) {
	l.ctx = ctx
	ticker := time.NewTicker(l.pol.Watch.Interval)
	defer ticker.Stop()
	var watchdog <-chan time.Time
	if n := l.deps.Notifier; n != nil && n.WatchdogInterval() > 0 {
		t := time.NewTicker(n.WatchdogInterval() / 2)
		defer t.Stop()
		watchdog = t.C
		_ = n.Watchdog()
	}
	defer l.backoff.stop()
	defer l.stopWait.stop()

	l.enterWaiting(l.target, nil)
	ctxDone := ctx.Done()
	for !l.finished {
		select {
		case <-ticker.C:
			l.onTick()
		case r := <-l.samples:
			l.onSample(r)
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

func (l *loop) onTick() {
	now := time.Now()
	if l.sampling {
		if !l.probeHung && now.Sub(l.samplingSince) > l.cfg.ProbeTimeout {
			l.probeHung = true
			l.probeFailed(now, "probe call has not returned for "+now.Sub(l.samplingSince).Round(time.Millisecond).String())
		}
	} else {
		l.startSample()
	}
	if n := l.ledger.Expire(now); len(n) > 0 {
		l.deps.Logf("%d admission lease(s) expired", len(n))
	}
}

// startSample runs one probe call on its own goroutine, so a hung driver
// call never blocks the loop; at most one is in flight.
func (l *loop) startSample() {
	if l.sampling {
		return
	}
	l.sampling = true
	l.samplingSince = time.Now()
	pid := 0
	if l.child != nil {
		pid = l.child.PID()
	}
	probe, tree, timeout, out, done := l.deps.Probe, l.deps.Tree, l.cfg.ProbeTimeout, l.samples, l.s.done
	ctx := l.ctx
	go func() {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		t0 := time.Now()
		s, err := probe.Sample(cctx)
		r := sampleResult{sample: s, err: err, took: time.Since(t0), forPID: pid}
		if pid > 0 && tree != nil {
			r.tree, _ = tree(pid)
		}
		select {
		case out <- r:
		case <-done:
		}
	}()
}

func (l *loop) probeFailed(now time.Time, msg string) {
	// One journal line per streak and then one a minute: a lost GPU would
	// otherwise write five lines a second.
	if msg != l.probeErr || now.Sub(l.probeErrAt) >= time.Minute {
		l.deps.Logf("GPU probe failed: %s (the child keeps running; no decisions without data)", msg)
		l.emit(api.Event{Event: api.EventProbeError, Detail: msg})
		l.probeErrAt = now
	}
	l.probeErr = msg
}

func (l *loop) onRequest(r request) {
	switch r.op {
	case opStep:
		l.manualStep(r)
	case opReserve:
		r.reply <- response{decision: l.reserve(r.reserve)}
	case opRelease:
		if !l.ledger.Release(r.lease) {
			r.reply <- response{err: errUnknownLease}
			return
		}
		r.reply <- response{}
	}
}

func (l *loop) reserve(req admission.Request) admission.Decision {
	now := time.Now()
	l.ledger.Expire(now)
	var usage []admission.GPUUsage
	if l.haveSample {
		for _, d := range l.lastSample.Devices {
			usage = append(usage, admission.GPUUsage{Used: d.Used, Limit: limit(d, l.pol.Watch.Quota)})
		}
	}
	if len(usage) == 0 {
		// No measurement yet: nothing can be promised.
		usage = []admission.GPUUsage{{}}
	}
	pending := l.rules.stepPending() || l.plan != nil || l.child == nil
	d := l.ledger.Decide(now, req, usage, l.pol.Watermark.High, pending)
	l.emit(api.Event{Event: api.EventAdmission, Decision: d.Decision, Bytes: req.Bytes,
		Priority: req.Priority, Tool: req.Tool, Lease: d.Lease, Reason: d.Reason})
	return d
}
