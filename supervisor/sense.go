package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/trend"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// sensor is what the loop asks of the watermark's trend after each
// sample: when the next sample is due, how soon critical comes, and
// whether it comes within the lead. trend.Tracker is the one in use.
type sensor interface {
	Observe(at time.Time, ratio float64, s trend.Settings) trend.Forecast
	Reset()
}

// trendSettings are the policy values the trend rules read.
func trendSettings(p *policy.Policy) trend.Settings {
	w, wm := p.Watch, p.Watermark
	return trend.Settings{Adaptive: w.Adaptive, Interval: w.Interval, MinInterval: w.MinInterval,
		MaxInterval: w.MaxInterval, High: wm.High, Critical: wm.Critical, Low: wm.Low, Lead: wm.Lead}
}

// pacer keeps the sampling schedule. The sampler re-arms its own timer as
// each call begins; the pacer corrects it when the period changed (or a
// sample is wanted now), and keeps a deadline timer (hung) by which the
// next call must have returned. Neither wakes the loop while things go
// well: each result comes first and moves the deadline on. next is when
// the next call is (or was) due: at or before now, a call is under way.
// It also keeps the trend's newest forecast, which sets the period.
type pacer struct {
	smp     *sampler
	next    time.Time
	period  time.Duration
	soon    bool          // the next sample is wanted at once
	kicked  bool          // the idle sampler is to be woken before the loop waits (wake)
	hung    *time.Timer   // fires when a call has not returned by timeout after it was due
	timeout time.Duration // the loop's one probe timeout (Config.ProbeTimeout); a reload may change it
	sense   sensor
	fc      trend.Forecast // after the newest good sample
	// probeHung: the call in flight ran past timeout (and was counted).
	probeHung bool
}

func newPacer(probe gpu.Probe, timeout, interval time.Duration) pacer {
	return pacer{smp: newSampler(probe, timeout, interval), hung: stoppedTimer(),
		timeout: timeout, period: interval, sense: new(trend.Tracker)}
}

// setTimeout takes a new ProbeTimeout, for this call's deadline on.
func (p *pacer) setTimeout(d time.Duration) {
	p.timeout = d
	p.smp.timeout.Store(int64(d))
}

// reschedule runs after every result: the next sample is due period after
// this one was, or now when one is wanted at once.
func (p *pacer) reschedule(r sampleResult, now time.Time) {
	p.smp.period.Store(int64(p.period))
	want := r.due.Add(p.period)
	if p.soon || want.Before(now) {
		want = now
	}
	p.soon = false
	p.next = r.next
	// Stop fails when the timer has fired: that call is under way, and
	// its result comes next.
	if !want.Equal(r.next) && p.smp.next.Stop() {
		if want.Equal(now) {
			p.kick()
		} else {
			p.smp.next.Reset(want.Sub(now))
		}
		p.next = want
	}
	p.next = later(p.next, now)
	p.hung.Reset(p.next.Sub(now) + p.timeout)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sampleNow asks for a sample at once (a start is waiting for one, or a
// new child's first sample). When a call is already under way, its result
// serves, and the one after it is due at once.
func (p *pacer) sampleNow() {
	if time.Now().Before(p.next) && p.smp.next.Stop() { // the sampler waits
		p.armNow()
		return
	}
	p.soon = true
}

// armNow starts a call now; the sampler is idle and its timer stopped.
func (p *pacer) armNow() {
	p.kick()
	p.next = time.Now()
	p.hung.Reset(p.timeout)
}

// kick asks the idle sampler for a call now, without a timer (a start
// waits for that call). The sampler is woken by wake, when the loop is
// about to wait, not here.
func (p *pacer) kick() { p.kicked = true }

// wake wakes the sampler for the call kick asked for; the loop calls it
// right before it waits for its next input. Waking it last matters: the
// goroutine readied last runs first on the loop's processor once the loop
// waits, so a sampler woken in the middle of an exit's handling would run
// after the goroutines readied later in it (the tenant info publisher,
// the journal writer, each writing a file), and a restart waits for that
// sample (docs/performance.md, "The restart gap, H55"). A kick already
// pending does the same.
func (p *pacer) wake() {
	if !p.kicked {
		return
	}
	p.kicked = false
	select {
	case p.smp.kick <- struct{}{}:
	default:
	}
}

// setPeriod takes the period the trend asks for after a sample; failures
// and samples without a trend (d = 0) fall back to interval.
func (p *pacer) setPeriod(d, interval time.Duration) {
	if d <= 0 {
		d = interval
	}
	p.period = d
}

// hang marks the call in flight as hung; first reports whether it was
// not yet (a hung call is counted once).
func (p *pacer) hang() (first bool) {
	first = !p.probeHung
	p.probeHung = true
	return first
}

// answered takes the hung mark off as a result comes; hung reports
// whether that call had already been counted as a failure.
func (p *pacer) answered() (hung bool) {
	hung = p.probeHung
	p.probeHung = false
	return hung
}

// forecast feeds a good sample's ratio to the trend, keeps what it says
// and takes the period it asks for.
func (p *pacer) forecast(now time.Time, ratio float64, pol *policy.Policy) {
	p.fc = p.sense.Observe(now, ratio, trendSettings(pol))
	p.setPeriod(p.fc.Period, pol.Watch.Interval)
}

// reset forgets the trend: a new child's memory has no history.
func (p *pacer) reset() {
	p.sense.Reset()
	p.fc = trend.Forecast{}
}

// setTarget tells the sampler whose processes to look for: child's (nil:
// none), through its own Owner or else owned.
func (p *pacer) setTarget(child Child, owned func(root int, pids []int) []int) {
	if child == nil {
		p.smp.target.Store(nil)
		return
	}
	pid := child.PID()
	t := &sampleTarget{pid: pid}
	if o, ok := child.(Owner); ok {
		t.owned = o.Owned
	} else if owned != nil {
		t.owned = func(pids []int) []int { return owned(pid, pids) }
	}
	p.smp.target.Store(t)
}

// etaSeconds is the status object's eta_seconds: nil when not rising.
func (p *pacer) etaSeconds() *float64 {
	if !p.fc.Rising {
		return nil
	}
	return new(p.fc.ETA.Seconds())
}

// onHung runs when a probe call has not returned within ProbeTimeout, and
// then every interval while it stays stuck: a hung call is a failed one,
// counted once; it stays in flight (a driver call cannot be interrupted)
// and no other starts, but the loop goes on without data.
func (l *loop) onHung(now time.Time) {
	first := l.pace.hang()
	if first && l.deps.Meter != nil {
		l.deps.Meter.ObserveProbe(now.Sub(l.pace.next), errProbeHung)
	}
	l.feed(core.Gap{}, nil)
	l.health.report(&l.out, now, l.pace.next, fmt.Sprintf("%v: a call has not returned within %s", errProbeHung, l.pace.timeout), first)
	l.withoutReading(now, sampleResult{err: errProbeHung})
	l.pace.hung.Reset(l.pol.Watch.Interval)
}

// withoutReading moves the states on after a probe call that brought no
// reading (r.err: it failed, or it hangs): on_gpu_lost first, so that a
// lost GPU ends a wait rather than start a child only to stop it; then a
// start under way still ends at its cap (there is no reading to settle
// on), tracked before the states move as in onSample; a waiting start goes
// ahead without data, and a starting child counts as running, though
// unmeasured.
func (l *loop) withoutReading(now time.Time, r sampleResult) {
	if !l.life.end.finished && !l.life.stop.stopping && l.health.lost(now, l.pol.Watch) {
		l.feed(core.Lost{Err: l.health.lostErr, Running: l.life.run.child != nil, Restarting: l.life.plan != nil}, nil)
	}
	if l.life.end.finished {
		return
	}
	l.feed(core.Settling{Now: now, Running: l.life.run.child != nil}, nil)
	switch {
	case l.life.state == api.StateWaiting:
		l.feed(l.life.startFacts(now, r, l.faults.anyFaulted(), l.latest.claim(l.peers != nil, r.due)), nil)
	case l.life.state == api.StateStarting && l.life.run.child != nil:
		l.life.state = api.StateRunning // up, though unmeasured
	}
}
