package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/trend"
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

// The sampling schedule. The sampler re-arms its own timer as each call
// begins; the loop corrects it when the period changed (or a sample is
// wanted now), and keeps a deadline timer (hung) by which the next call
// must have returned. Neither wakes the loop while things go well: each
// result comes first and moves the deadline on. l.next is when the next
// call is (or was) due: at or before now, a call is under way.

// reschedule runs after every result: the next sample is due period after
// this one was, or now when one is wanted at once.
func (l *loop) reschedule(r sampleResult, now time.Time) {
	l.smp.period.Store(int64(l.period))
	want := r.due.Add(l.period)
	if l.soon || want.Before(now) {
		want = now
	}
	l.soon = false
	l.next = r.next
	// Stop fails when the timer has fired: that call is under way, and
	// its result comes next.
	if !want.Equal(r.next) && l.smp.next.Stop() {
		if want.Equal(now) {
			l.kick()
		} else {
			l.smp.next.Reset(want.Sub(now))
		}
		l.next = want
	}
	l.next = later(l.next, now)
	l.hung.Reset(l.next.Sub(now) + l.cfg.ProbeTimeout)
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
func (l *loop) sampleNow() {
	if time.Now().Before(l.next) && l.smp.next.Stop() { // the sampler waits
		l.armNow()
		return
	}
	l.soon = true
}

// armNow starts a call now; the sampler is idle and its timer stopped.
func (l *loop) armNow() {
	l.kick()
	l.next = time.Now()
	l.hung.Reset(l.cfg.ProbeTimeout)
}

// kick wakes the idle sampler for a call now, without a timer (a start
// waits for that call). A kick already pending does the same.
func (l *loop) kick() {
	select {
	case l.smp.kick <- struct{}{}:
	default:
	}
}

// setPeriod takes the period the trend asks for after a sample; failures
// and samples without a trend fall back to the interval.
func (l *loop) setPeriod(d time.Duration) {
	if d <= 0 {
		d = l.pol.Watch.Interval
	}
	l.period = d
}

// onHung runs when a probe call has not returned within ProbeTimeout, and
// then every interval while it stays stuck: a hung call is a failed one,
// counted once; it stays in flight (a driver call cannot be interrupted)
// and no other starts, but the loop goes on without data.
func (l *loop) onHung(now time.Time) {
	first := !l.probeHung
	l.probeHung = true
	if first && l.deps.Meter != nil {
		l.deps.Meter.ObserveProbe(now.Sub(l.next), errProbeHung)
	}
	l.probeFailed(now, l.next, fmt.Sprintf("%v: a call has not returned within %s", errProbeHung, l.cfg.ProbeTimeout), first)
	l.withoutReading(now, sampleResult{err: errProbeHung})
	l.hung.Reset(l.pol.Watch.Interval)
}

// withoutReading moves the states on after a probe call that brought no
// reading (r.err: it failed, or it hangs): on_gpu_lost first, so that a
// lost GPU ends a wait rather than start a child only to stop it; then a
// start under way still ends at its cap (there is no reading to settle
// on), tracked before the states move as in onSample; a waiting start goes
// ahead without data, and a starting child counts as running, though
// unmeasured.
func (l *loop) withoutReading(now time.Time, r sampleResult) {
	l.checkLost(now)
	if l.finished {
		return
	}
	l.trackStart(now, r)
	switch {
	case l.state == api.StateWaiting:
		l.tryStart(r)
	case l.state == api.StateStarting && l.child != nil:
		l.state = api.StateRunning // up, though unmeasured
	}
}

// setTarget tells the sampler whose processes to look for.
func (l *loop) setTarget() {
	if l.child == nil {
		l.smp.target.Store(nil)
		return
	}
	pid := l.child.PID()
	t := &sampleTarget{pid: pid}
	if o, ok := l.child.(Owner); ok {
		t.owned = o.Owned
	} else if owned := l.deps.Owned; owned != nil {
		t.owned = func(pids []int) []int { return owned(pid, pids) }
	}
	l.smp.target.Store(t)
}

// forecast feeds a good sample to the trend and keeps what it says.
func (l *loop) forecast(now time.Time) {
	l.fc = l.sense.Observe(now, l.ratio, trendSettings(l.pol))
	l.setPeriod(l.fc.Period)
}

// etaSeconds is the status object's eta_seconds: nil when not rising.
func (l *loop) etaSeconds() *float64 {
	if !l.fc.Rising {
		return nil
	}
	return ptr(l.fc.ETA.Seconds())
}
