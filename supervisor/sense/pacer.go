package sense

import (
	"context"
	"time"

	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/trend"
	"github.com/gpuguard/gpuguard/policy"
)

// sensor is what the pacer asks of the watermark's trend after each
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

// Pacer keeps the sampling schedule. The sampler re-arms its own timer as
// each call begins; the pacer corrects it when the period changed (or a
// sample is wanted now), and keeps a deadline timer (Hung) by which the
// next call must have returned. Neither wakes the loop while things go
// well: each result comes first and moves the deadline on. next is when
// the next call is (or was) due: at or before now, a call is under way.
// It also keeps the trend's newest forecast, which sets the period.
type Pacer struct {
	smp    *sampler
	next   time.Time
	period time.Duration
	soon   bool      // the next sample is wanted at once
	kicked bool      // the idle sampler is to be woken before the loop waits (Wake)
	hung   Alarm     // fires when a call has not returned by the probe timeout after it was due
	hungAt time.Time // when hung was last armed for
	sense  sensor
	fc     trend.Forecast // after the newest good sample
	// probeHung: the call in flight ran past timeout (and was counted).
	probeHung bool
}

// NewPacer paces calls of probe, each bounded by timeout, every interval
// until the trend says otherwise. Its two timers (the sampler's and the
// hung deadline) are made by newAlarm (nil: NewRuntimeAlarm).
func NewPacer(probe gpu.Probe, timeout, interval time.Duration, newAlarm func() Alarm) *Pacer {
	if newAlarm == nil {
		newAlarm = NewRuntimeAlarm
	}
	return &Pacer{smp: newSampler(probe, timeout, interval, newAlarm()), hung: newAlarm(),
		period: interval, sense: new(trend.Tracker)}
}

// Run makes the probe calls until done is closed (on a goroutine of its
// own: the sampler).
func (p *Pacer) Run(ctx context.Context, done <-chan struct{}) { p.smp.run(ctx, done) }

// Stop releases the timers, as the run ends.
func (p *Pacer) Stop() {
	p.smp.next.Close()
	p.hung.Close()
}

// Results is where each call's result comes.
func (p *Pacer) Results() <-chan Result { return p.smp.out }

// Hung fires when a call has not returned by the probe timeout after it
// was due, and then every interval while it stays stuck (Rearm). A fire
// Overdue does not confirm is from before the deadline moved: ignore it.
func (p *Pacer) Hung() <-chan time.Time { return p.hung.C() }

// Overdue reports whether a Hung fire at fired is due: at or after the
// deadline in force. A kernel alarm (NewKernelAlarm) may deliver a fire
// from before the last Reset, when the deadline expired while the result
// that moved it was on its way.
func (p *Pacer) Overdue(fired time.Time) bool { return !fired.Before(p.hungAt) }

// Rearm moves the hung deadline d on: a call that stays stuck is said
// again then.
func (p *Pacer) Rearm(d time.Duration) { p.armHung(time.Now(), d) }

// armHung sets the hung deadline d after now.
func (p *Pacer) armHung(now time.Time, d time.Duration) {
	p.hungAt = now.Add(d)
	p.hung.Reset(d)
}

// Timeout is the probe timeout in force (Config.ProbeTimeout): the
// sampler's, which bounds an interruptible probe's calls.
func (p *Pacer) Timeout() time.Duration { return time.Duration(p.smp.timeout.Load()) }

// SetTimeout takes a new probe timeout (a reload), for this call's
// deadline on.
func (p *Pacer) SetTimeout(d time.Duration) { p.smp.timeout.Store(int64(d)) }

// Due is when the newest call was (or the next is) due.
func (p *Pacer) Due() time.Time { return p.next }

// Period is the sampling period in force.
func (p *Pacer) Period() time.Duration { return p.period }

// Reschedule runs after every result: the next sample is due period after
// this one was, or now when one is wanted at once.
func (p *Pacer) Reschedule(r Result, now time.Time) {
	p.smp.period.Store(int64(p.period))
	want := r.Due.Add(p.period)
	if p.soon || want.Before(now) {
		want = now
	}
	p.soon = false
	p.next = r.Next
	// Stop fails when the timer has fired: that call is under way, and
	// its result comes next.
	if !want.Equal(r.Next) && p.smp.next.Stop() {
		if want.Equal(now) {
			p.kick()
		} else {
			p.smp.next.Reset(want.Sub(now))
		}
		p.next = want
	}
	p.next = later(p.next, now)
	p.armHung(now, p.next.Sub(now)+p.Timeout())
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SampleNow asks for a sample at once (a start is waiting for one, or a
// new child's first sample). When a call is already under way, its result
// serves, and the one after it is due at once.
func (p *Pacer) SampleNow() {
	if time.Now().Before(p.next) && p.smp.next.Stop() { // the sampler waits
		p.ArmNow()
		return
	}
	p.soon = true
}

// ArmNow starts a call now; the sampler is idle and its timer stopped.
func (p *Pacer) ArmNow() {
	p.kick()
	p.next = time.Now()
	p.armHung(p.next, p.Timeout())
}

// kick asks the idle sampler for a call now, without a timer (a start
// waits for that call). The sampler is woken by Wake, when the loop is
// about to wait, not here.
func (p *Pacer) kick() { p.kicked = true }

// Wake wakes the sampler for the call kick asked for; the loop calls it
// right before it waits for its next input. Waking it last matters: the
// goroutine readied last runs first on the loop's processor once the loop
// waits, so a sampler woken in the middle of an exit's handling would run
// after the goroutines readied later in it (the tenant info publisher,
// the journal writer, each writing a file), and a restart waits for that
// sample (docs/performance.md, "3. Restart latency"). A kick already pending
// does the same.
func (p *Pacer) Wake() {
	if !p.kicked {
		return
	}
	p.kicked = false
	select {
	case p.smp.kick <- struct{}{}:
	default:
	}
}

// SetPeriod takes the period the trend asks for after a sample; failures
// and samples without a trend (d = 0) fall back to interval.
func (p *Pacer) SetPeriod(d, interval time.Duration) {
	if d <= 0 {
		d = interval
	}
	p.period = d
}

// Hang marks the call in flight as hung; first reports whether it was
// not yet (a hung call is counted once).
func (p *Pacer) Hang() (first bool) {
	first = !p.probeHung
	p.probeHung = true
	return first
}

// Answered takes the hung mark off as a result comes; hung reports
// whether that call had already been counted as a failure.
func (p *Pacer) Answered() (hung bool) {
	hung = p.probeHung
	p.probeHung = false
	return hung
}

// Observe feeds a good sample's ratio to the trend, keeps what it says
// and takes the period it asks for.
func (p *Pacer) Observe(now time.Time, ratio float64, pol *policy.Policy) {
	p.fc = p.sense.Observe(now, ratio, trendSettings(pol))
	p.SetPeriod(p.fc.Period, pol.Watch.Interval)
}

// Forecast is what the trend said after the newest good sample.
func (p *Pacer) Forecast() trend.Forecast { return p.fc }

// Reset forgets the trend: a new child's memory has no history.
func (p *Pacer) Reset() {
	p.sense.Reset()
	p.fc = trend.Forecast{}
}

// SetTarget tells the sampler whose processes to look for: the child
// whose main process is pid (0: none), and which GPU processes are its
// own (owned; nil: unknown).
func (p *Pacer) SetTarget(pid int, owned func(pids []int) []int) {
	if pid == 0 {
		p.smp.target.Store(nil)
		return
	}
	p.smp.target.Store(newTarget(pid, owned))
}

// ETASeconds is the status object's eta_seconds: nil when not rising.
func (p *Pacer) ETASeconds() *float64 {
	if !p.fc.Rising {
		return nil
	}
	return new(p.fc.ETA.Seconds())
}
