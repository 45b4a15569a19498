package supervisor

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// curveProbe is a GPU whose usage follows a curve over time: ratio(t),
// t since the probe was made, plus uniform noise of ± noise; it counts
// its calls.
type curveProbe struct {
	*fakeProbe
	mu    sync.Mutex
	start time.Time
	ratio func(t time.Duration) float64
	noise float64
	rng   *rand.Rand
	calls []time.Time
}

func newCurveProbe(ratio func(time.Duration) float64, noise float64) *curveProbe {
	return &curveProbe{fakeProbe: newFakeProbe(16 * gib), start: time.Now(), ratio: ratio, noise: noise,
		rng: rand.New(rand.NewPCG(1, 2))}
}

func (p *curveProbe) Sample(ctx context.Context) (gpu.Sample, error) {
	p.mu.Lock()
	now := time.Now()
	r := p.ratio(now.Sub(p.start)) + p.noise*(2*p.rng.Float64()-1)
	p.calls = append(p.calls, now)
	p.mu.Unlock()
	p.setUsed(uint64(math.Max(r, 0) * float64(16*gib)))
	return p.fakeProbe.Sample(ctx)
}

// callsIn counts the probe calls in [from, to).
func (p *curveProbe) callsIn(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if !c.Before(from) && c.Before(to) {
			n++
		}
	}
	return n
}

// sensePolicy is testPolicy with the default adaptive polling (200 ms in
// [20 ms, 1 s]), live profiles and lead.
func sensePolicy(lead time.Duration) *policy.Policy {
	pol := testPolicy()
	pol.Watch.Interval, pol.Watch.Adaptive = 200*time.Millisecond, true
	pol.Watch.MinInterval, pol.Watch.MaxInterval = 20*time.Millisecond, time.Second
	pol.Watermark.Lead = lead
	for i := range pol.Profiles {
		pol.Profiles[i].Live, pol.Profiles[i].Needs = true, 0
	}
	return pol
}

func curveHarness(t *testing.T, pol *policy.Policy, p *curveProbe) *harness {
	return startHarness(t, pol, func(c *Config, d *Deps) {
		p.fakeProbe = d.Probe.(*fakeProbe)
		d.Probe = p
	})
}

func stop(h *harness, c *fakeChild) {
	h.signals <- syscall.SIGTERM
	synctest.Wait()
	c.end(Exit{Code: 0})
	h.wait()
}

// TestAdaptivePeriod: calm polls every max_interval once the trend has
// been flat for 5 s below low; a rise toward high polls faster than the
// interval, and status shows the period and the ETA while rising.
func TestAdaptivePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Calm at 0.3 for 20 s, then rising 0.1/s, then flat at 0.88.
		p := newCurveProbe(func(d time.Duration) float64 {
			s := d.Seconds()
			return min(0.3+0.1*max(s-20, 0), 0.88)
		}, 0)
		h := curveHarness(t, sensePolicy(0), p)
		c := h.child()
		sleep(500 * time.Millisecond)
		if st := h.sup.Status(); st.IntervalSeconds != 0.2 || st.ETASeconds != nil {
			t.Fatalf("before a trend: interval %v eta %v, want 0.2 and none", st.IntervalSeconds, st.ETASeconds)
		}
		sleep(9500 * time.Millisecond) // t = 10 s
		if st := h.sup.Status(); st.IntervalSeconds != 1 || st.ETASeconds != nil {
			t.Fatalf("calm: interval %v eta %v, want 1 and none", st.IntervalSeconds, st.ETASeconds)
		}
		from := time.Now()
		sleep(10 * time.Second)
		if n := p.callsIn(from, time.Now()); n < 9 || n > 11 {
			t.Fatalf("%d probe calls in 10 s of calm, want 10", n)
		}
		// t = 20 s: the rise starts; at 0.1/s it reaches 0.88 at 25.8 s.
		sleep(3500 * time.Millisecond) // 0.65
		st := h.sup.Status()
		if st.IntervalSeconds != 0.2 || st.ETASeconds == nil {
			t.Fatalf("rising far from high: interval %v eta %v, want 0.2 and an ETA", st.IntervalSeconds, st.ETASeconds)
		}
		sleep(1500 * time.Millisecond) // 0.80 -> (0.90-0.80)/0.1/4 = 250 ms: still the interval
		from = time.Now()
		sleep(800 * time.Millisecond) // 0.88, 50 ms
		if n := p.callsIn(from, time.Now()); n < 6 {
			t.Fatalf("%d probe calls in the last 800 ms of the rise, want more than 4 (200 ms)", n)
		}
		if st := h.sup.Status(); st.IntervalSeconds >= 0.1 {
			t.Fatalf("interval %v at 0.88 rising 0.1/s, want about 50 ms", st.IntervalSeconds)
		}
		sleep(11 * time.Second)
		if st := h.sup.Status(); st.IntervalSeconds != 0.2 || st.ETASeconds != nil {
			t.Fatalf("flat at 0.88 for 11 s: interval %v eta %v, want 0.2 and none", st.IntervalSeconds, st.ETASeconds)
		}
		stop(h, c)
	})
}

// TestRisingTowardHighPollsAtMinInterval: close to high on a steep rise,
// and above it while rising, the period is min_interval.
func TestRisingTowardHighPollsAtMinInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newCurveProbe(func(d time.Duration) float64 { return 0.5 + 0.1*d.Seconds() }, 0)
		h := curveHarness(t, sensePolicy(0), p)
		c := h.child()
		sleep(3900 * time.Millisecond) // 0.89
		from := time.Now()
		sleep(100 * time.Millisecond)
		if n := p.callsIn(from, time.Now()); n < 4 {
			t.Fatalf("%d calls in 100 ms at 0.89-0.90 rising 0.1/s, want 4-5 (25-20 ms)", n)
		}
		sleep(100 * time.Millisecond) // above high, still rising
		if st := h.sup.Status(); st.IntervalSeconds != 0.02 {
			t.Fatalf("interval %v above high and rising, want 0.02", st.IntervalSeconds)
		}
		stop(h, c)
	})
}

// TestNotAdaptivePollsEveryInterval: adaptive = false keeps the interval
// whatever the watermark does.
func TestNotAdaptivePollsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newCurveProbe(func(d time.Duration) float64 { return min(0.2+0.05*max(d.Seconds()-20, 0), 0.85) }, 0)
		pol := sensePolicy(0)
		pol.Watch.Adaptive = false
		h := curveHarness(t, pol, p)
		c := h.child()
		t0 := time.Now()
		sleep(35 * time.Second)
		if n := p.callsIn(t0, time.Now()); n < 174 || n > 177 {
			t.Fatalf("%d probe calls in 35 s at 200 ms, want 175", n)
		}
		if st := h.sup.Status(); st.IntervalSeconds != 0.2 {
			t.Fatalf("interval %v", st.IntervalSeconds)
		}
		stop(h, c)
	})
}

// TestPredictedStepBeforeHigh: lead 5 s, a steady 0.03/s ramp from 0.55
// (high 0.90 at 11.7 s). The step comes before high, with reason
// predicted, and after it the grace period holds.
func TestPredictedStepBeforeHigh(t *testing.T) {
	for _, noise := range []float64{0, 0.02} {
		synctest.Test(t, func(t *testing.T) {
			p := newCurveProbe(func(d time.Duration) float64 { return 0.55 + 0.03*d.Seconds() }, noise)
			h := curveHarness(t, sensePolicy(5*time.Second), p)
			c := h.child()
			sleep(11 * time.Second) // 0.88
			ev := h.rec.named(api.EventStepDown)
			if len(ev) != 1 || ev[0].Reason != api.ReasonPredicted || ev[0].Watermark >= 0.90 {
				t.Fatalf("noise %.2f: stepdowns %+v, want one predicted before high", noise, ev)
			}
			if st := h.rec.lastState(); st.Profile != "int8" {
				t.Fatalf("state file %+v", st)
			}
			if st := h.sup.Status(); st.ETASeconds == nil || *st.ETASeconds > 5 {
				t.Fatalf("eta %v, want under the lead", st.ETASeconds)
			}
			sleep(2 * time.Second)
			if n := len(h.rec.named(api.EventStepDown)); n != 1 {
				t.Fatalf("%d stepdowns within grace", n)
			}
			stop(h, c)
		})
	}
}

// TestNoPredictedStepWithinGraceOfTheStart: a child's own start-up growth
// does not predict; here the ramp crosses high first, and the step is a
// watermark one.
func TestNoPredictedStepWithinGraceOfTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newCurveProbe(func(d time.Duration) float64 { return 0.55 + 0.03*d.Seconds() }, 0)
		pol := sensePolicy(5 * time.Second)
		pol.Watermark.Grace = 20 * time.Second
		h := curveHarness(t, pol, p)
		c := h.child()
		sleep(14 * time.Second)
		ev := h.rec.named(api.EventStepDown)
		if len(ev) != 1 || ev[0].Reason != api.ReasonWatermark {
			t.Fatalf("stepdowns %+v, want one watermark step after high", ev)
		}
		stop(h, c)
	})
}

// TestNoPredictedWithoutLead: lead 0 never predicts, however steep.
func TestNoPredictedWithoutLead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newCurveProbe(func(d time.Duration) float64 { return min(0.55+0.03*d.Seconds(), 0.899) }, 0)
		h := curveHarness(t, sensePolicy(0), p)
		c := h.child()
		sleep(30 * time.Second)
		if n := len(h.rec.named(api.EventStepDown)); n != 0 {
			t.Fatalf("%d stepdowns below high with lead 0", n)
		}
		stop(h, c)
	})
}

// TestNoFalsePredictedStep: 10 simulated minutes of flat usage with ±2 %
// noise, and of sawtooths that never reach high, with lead 5 s: no step.
// The first tooth of the 7 s sawtooth (0.70 to 0.89 at 0.027/s) is a clean
// ramp that projects critical within 5 s; nothing can tell it from one
// until it drops, so it may step once (docs/sensing.md). Every later tooth
// has the drops before it in the 10 s window and must not.
func TestNoFalsePredictedStep(t *testing.T) {
	saw := func(lo, hi float64, period time.Duration) func(time.Duration) float64 {
		return func(d time.Duration) float64 {
			return lo + (hi-lo)*float64(d%period)/float64(period)
		}
	}
	tests := []struct {
		name  string
		ratio func(time.Duration) float64
		noise float64
		after time.Duration // steps before this are not counted
	}{
		{"flat ±2% at 0.85", func(time.Duration) float64 { return 0.85 }, 0.02, 0},
		{"flat ±2% at 0.87", func(time.Duration) float64 { return 0.87 }, 0.02, 0},
		{"sawtooth 0.72-0.88 every 4 s", saw(0.72, 0.88, 4*time.Second), 0, 0},
		{"noisy sawtooth 0.65-0.87 every 3 s", saw(0.65, 0.87, 3*time.Second), 0.01, 0},
		{"sawtooth 0.70-0.89 every 7 s, after the first tooth", saw(0.70, 0.89, 7*time.Second), 0, 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newCurveProbe(tt.ratio, tt.noise)
				h := curveHarness(t, sensePolicy(5*time.Second), p)
				c := h.child()
				sleep(10 * time.Minute)
				for _, ev := range h.rec.named(api.EventStepDown) {
					if ev.Time.Sub(p.start) >= tt.after {
						t.Fatalf("a stepdown at %s: %+v", ev.Time.Sub(p.start), ev)
					}
				}
				stop(h, c)
			})
		})
	}
}

// TestLoopHoldsOneProbeTimeout: the pacer holds the probe timeout (the
// given one, or the default), and a reload of an interval moves it there;
// the loop's copy of the Config holds none, so nothing reads a stale one.
func TestLoopHoldsOneProbeTimeout(t *testing.T) {
	for _, given := range []time.Duration{0, 7 * time.Second} {
		rec := &recorder{}
		s, err := New(Config{Name: "t", Policy: testPolicy(), Command: []string{"x"}, ProbeTimeout: given},
			Deps{Probe: newFakeProbe(16 * gib), Launcher: newFakeLauncher(), WriteState: rec.writeState, RotateCheckpoint: rec.rotate})
		if err != nil {
			t.Fatal(err)
		}
		l := newLoop(s)
		want := given
		if want == 0 {
			want = defaultProbeTimeout(testPolicy())
		}
		if l.cfg.ProbeTimeout != 0 {
			t.Errorf("given %s: the loop's cfg holds a probe timeout (%s) beside the pacer's", given, l.cfg.ProbeTimeout)
		}
		if l.pace.Timeout() != want {
			t.Errorf("given %s: pacer %s, want %s", given, l.pace.Timeout(), want)
		}
		next := testPolicy()
		next.Watch.Interval, next.Watch.MaxInterval = time.Second, time.Second
		r := request{op: opReload, reload: &Reload{Policy: next}, reply: make(chan response, 1)}
		l.applyReload(r)
		<-r.reply
		if given == 0 {
			want = defaultProbeTimeout(next)
		}
		if l.cfg.ProbeTimeout != 0 || l.pace.Timeout() != want {
			t.Errorf("given %s, after a reload: cfg %s, pacer %s, want %s", given, l.cfg.ProbeTimeout, l.pace.Timeout(), want)
		}
	}
}
