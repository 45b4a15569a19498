package supervisor

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// GPU faults as the loop sees them: a GPU lost mid-run, a probe call that
// never returns, errors that come and go. The rules under test: no
// decision without fresh data, every fault journaled (rate-limited) and
// counted, the loop never blocked, and on_gpu_lost applied.

// meter is a ProbeMeter that counts.
type meter struct {
	mu           sync.Mutex
	calls, fails int
}

func (m *meter) ObserveProbe(d time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if err != nil {
		m.fails++
	}
}

func (m *meter) errors() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fails
}

// flakyProbe wraps a fakeProbe: fail decides, per call (1-based), whether
// it fails; hang, when set, blocks a call until released, ignoring ctx as
// a call stuck in the driver does.
type flakyProbe struct {
	*fakeProbe
	mu    sync.Mutex
	n     int
	fail  func(n int) error
	hang  chan struct{}
	inCnt int // calls in flight
	maxIn int
}

func (p *flakyProbe) Sample(ctx context.Context) (gpu.Sample, error) {
	p.mu.Lock()
	p.n++
	n, fail, hang := p.n, p.fail, p.hang
	p.inCnt++
	p.maxIn = max(p.maxIn, p.inCnt)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inCnt--
		p.mu.Unlock()
	}()
	if hang != nil {
		<-hang
	}
	if fail != nil {
		if err := fail(n); err != nil {
			return gpu.Sample{}, err
		}
	}
	return p.fakeProbe.Sample(ctx)
}

func (p *flakyProbe) set(fail func(int) error, hang chan struct{}) {
	p.mu.Lock()
	p.fail, p.hang = fail, hang
	p.mu.Unlock()
}

func (p *flakyProbe) stats() (calls, maxInFlight int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.maxIn
}

// faultHarness is startHarness with a flakyProbe and a meter.
func faultHarness(t *testing.T, pol *policy.Policy) (*harness, *flakyProbe, *meter) {
	return faultHarnessFailing(t, pol, nil)
}

// faultHarnessFailing fails probe calls from the very first.
func faultHarnessFailing(t *testing.T, pol *policy.Policy, fail func(int) error) (*harness, *flakyProbe, *meter) {
	fp, m := &flakyProbe{fail: fail}, &meter{}
	h := startHarness(t, pol, func(c *Config, d *Deps) {
		fp.fakeProbe = d.Probe.(*fakeProbe)
		d.Probe, d.Meter = fp, m
	})
	return h, fp, m
}

func always(err error) func(int) error { return func(int) error { return err } }

func sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// TestGPULostMidRunKeepsChildAndNeedsFreshSustain: the GPU falls off the
// bus while memory is above high. The child keeps running, nothing is
// decided, the streak is journaled once and every failed call counted;
// once the GPU is back, a step down needs a full `sustain` of fresh data:
// the time above high before the gap does not count.
func TestGPULostMidRunKeepsChildAndNeedsFreshSustain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h, fp, m := faultHarness(t, pol)
		c := h.child()
		h.probe.setUsed(15 * gib) // 0.94 > high
		sleep(900 * time.Millisecond)

		fp.set(always(errLost), nil)
		sleep(10 * time.Second) // 100 ticks without data
		if st := h.sup.Status(); st.State != api.StateRunning || st.ChildPID != c.pid {
			t.Fatalf("status while the GPU is lost: %+v", st)
		}
		if len(c.gotSignals()) != 0 || len(h.rec.named(api.EventStepDown)) != 0 {
			t.Fatal("a decision without data")
		}
		pe := h.rec.named(api.EventProbeError)
		if len(pe) != 1 || !strings.Contains(pe[0].Detail, "ERROR_GPU_IS_LOST") {
			t.Fatalf("probe_error events %+v, want one naming the error", pe)
		}
		if n := m.errors(); n < 95 || n > 101 {
			t.Fatalf("%d probe errors counted over 10s at 100ms, want about 100", n)
		}
		// Admission promises nothing on stale data.
		d, err := h.sup.Admission().Reserve(context.Background(), admission.Request{Bytes: 1, Priority: "P2", TTL: time.Minute})
		if err != nil || d.Decision != admission.DecisionDefer {
			t.Fatalf("reservation while the GPU is lost: %+v %v, want defer", d, err)
		}

		fp.set(nil, nil) // back, still above high
		sleep(950 * time.Millisecond)
		if len(h.rec.named(api.EventStepDown)) != 0 {
			t.Fatal("stepped down before `sustain` of fresh data: the sustain timer carried across the gap")
		}
		sleep(200 * time.Millisecond)
		if len(h.rec.named(api.EventStepDown)) != 1 {
			t.Fatal("no step down after `sustain` of fresh data above high")
		}
		c.end(Exit{})
		if code, err := h.wait(); code != 0 || err != nil {
			t.Fatalf("exit %d %v", code, err)
		}
	})
}

// TestFlappingProbe: every other call fails while memory is above high.
// No step down ever happens (no `sustain` of unbroken data), the journal
// gets one line a minute that counts the failures it stands for, and the
// metric counts every one.
func TestFlappingProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h, fp, m := faultHarness(t, pol)
		c := h.child()
		sleep(time.Second)
		h.probe.setUsed(16 * gib) // 1.0: above critical too
		var mu sync.Mutex
		failed := 0
		fp.set(func(n int) error {
			if n%2 == 0 {
				return nil
			}
			mu.Lock()
			failed++
			mu.Unlock()
			return errors.New("NVML: GPU 0: reading memory: ERROR_TIMEOUT")
		}, nil)
		sleep(90 * time.Second)
		if n := len(h.rec.named(api.EventStepDown)); n != 0 || len(c.gotSignals()) != 0 {
			t.Fatalf("%d step downs on flapping data, want none", n)
		}
		mu.Lock()
		want := failed
		mu.Unlock()
		if got := m.errors(); got != want || want < 400 {
			t.Fatalf("metric counted %d probe errors, %d happened", got, want)
		}
		pe := h.rec.named(api.EventProbeError)
		if len(pe) != 2 {
			t.Fatalf("%d probe_error lines in 90s of flapping, want 2 (one a minute)", len(pe))
		}
		if !strings.Contains(pe[1].Detail, "more failed probe calls since the last report") {
			t.Errorf("the second line does not count the failures it stands for: %q", pe[1].Detail)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestHungProbeLoopStaysResponsive: a probe call that never returns (and
// ignores its deadline, as a call stuck in the driver does) is reported
// once past ProbeTimeout and counted once; meanwhile the loop answers
// Step, Reserve and Status, and handles the child's crash and restart
// without data. No second call is started while one is stuck.
func TestHungProbeLoopStaysResponsive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h, fp, m := faultHarness(t, pol)
		c := h.child()
		sleep(time.Second)
		stuck := make(chan struct{})
		fp.set(nil, stuck)
		sleep(1900 * time.Millisecond)
		if len(h.rec.named(api.EventProbeError)) != 0 {
			t.Fatal("reported before ProbeTimeout (2s)")
		}
		sleep(300 * time.Millisecond)
		pe := h.rec.named(api.EventProbeError)
		if len(pe) != 1 || !strings.Contains(pe[0].Detail, "has not returned within 2s") {
			t.Fatalf("probe_error events %+v, want one for the hung call", pe)
		}
		if m.errors() != 1 {
			t.Fatalf("hung call counted %d times, want once", m.errors())
		}

		ctx := context.Background()
		if p, err := h.sup.Step(ctx, "down"); err != nil || p != "int8" {
			t.Fatalf("Step while the probe is stuck: %q %v", p, err)
		}
		if d, err := h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 1, Priority: "P0", TTL: time.Minute}); err != nil || d.Decision != admission.DecisionDeny {
			t.Fatalf("Reserve while the probe is stuck: %+v %v, want deny", d, err)
		}
		if st := h.sup.Status(); st.Profile != "int8" || st.ChildPID != c.pid {
			t.Fatalf("status %+v", st)
		}

		c.end(Exit{Code: 1}) // a crash: restart in the same profile after 1s backoff
		var c2 *fakeChild
		select {
		case c2 = <-h.launcher.launched:
		case <-time.After(time.Minute):
			t.Fatal("no restart within a minute while the probe is stuck")
		}
		if got := c2.env("GPUGUARD_LAST_EXIT"); got != "crash" {
			t.Fatalf("restarted with LAST_EXIT=%s", got)
		}
		sleep(time.Minute)
		if calls, in := fp.stats(); in != 1 {
			t.Fatalf("%d probe calls in flight at once (of %d), want 1", in, calls)
		}
		if n := len(h.rec.named(api.EventProbeError)); n != 2 {
			t.Fatalf("%d probe_error lines after a minute stuck, want 2 (one a minute)", n)
		}
		if m.errors() != 1 {
			t.Fatalf("one hung call counted %d times", m.errors())
		}

		close(stuck) // the driver answers at last
		sleep(500 * time.Millisecond)
		if calls, _ := fp.stats(); calls < 4 {
			t.Fatalf("sampling did not resume: %d calls", calls)
		}
		if st := h.sup.Status(); len(st.GPUs) != 1 {
			t.Fatalf("no GPU data after recovery: %+v", st)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestOnGPULostStop: with on_gpu_lost = "stop", lost_after without a
// reading stops the child with stop_signal and ends gpuguard with 1.
func TestOnGPULostStop(t *testing.T) {
	stopPolicy := func() *policy.Policy {
		pol := testPolicy()
		pol.Watch.OnGPULost, pol.Watch.LostAfter = policy.OnGPULostStop, 5*time.Second
		return pol
	}
	t.Run("stops the child and exits 1", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, fp, _ := faultHarness(t, stopPolicy())
			c := h.child()
			sleep(time.Second)
			c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{Code: 0}) })
			fp.set(always(errLost), nil)
			sleep(4900 * time.Millisecond)
			if len(c.gotSignals()) != 0 {
				t.Fatal("stopped before lost_after")
			}
			sleep(200 * time.Millisecond)
			code, err := h.wait()
			if code != 1 || err == nil || !strings.Contains(err.Error(), `on_gpu_lost = "stop"`) {
				t.Fatalf("exit %d %v, want 1 and an error naming on_gpu_lost", code, err)
			}
			if sigs := c.gotSignals(); len(sigs) != 1 || sigs[0] != syscall.SIGTERM {
				t.Fatalf("child got %v, want the stop signal once", sigs)
			}
			g := h.rec.named(api.EventGiveUp)
			if len(g) != 1 || g[0].Reason != core.ReasonGPULost {
				t.Fatalf("giveup events %+v", g)
			}
			if st := h.sup.Status(); st.State != api.StateFatal {
				t.Fatalf("state %s, want fatal", st.State)
			}
		})
	})
	t.Run("a child that ignores the stop signal is killed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, fp, _ := faultHarness(t, stopPolicy())
			c := h.child()
			fp.set(always(errLost), nil)
			sleep(5100 * time.Millisecond)
			if len(c.gotSignals()) != 1 {
				t.Fatal("no stop signal")
			}
			if code, _ := h.wait(); code != 1 || !c.killed {
				t.Fatalf("exit %d, killed %v; want 1 after SIGKILL at stop_timeout", code, c.killed)
			}
		})
	})
	t.Run("a hung probe counts as lost", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, fp, _ := faultHarness(t, stopPolicy())
			c := h.child()
			c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{Code: 143}) })
			sleep(time.Second)
			stuck := make(chan struct{})
			defer close(stuck)
			fp.set(nil, stuck)
			if code, err := h.wait(); code != 1 || err == nil {
				t.Fatalf("exit %d %v", code, err)
			}
		})
	})
	t.Run("a reading in between restarts lost_after", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h, fp, _ := faultHarness(t, stopPolicy())
			c := h.child()
			for range 5 {
				fp.set(always(errLost), nil)
				sleep(4500 * time.Millisecond)
				fp.set(nil, nil)
				sleep(150 * time.Millisecond)
			}
			if len(c.gotSignals()) != 0 || len(h.rec.named(api.EventGiveUp)) != 0 {
				t.Fatal("stopped though no outage lasted lost_after")
			}
			c.end(Exit{})
			if code, _ := h.wait(); code != 0 {
				t.Fatalf("exit %d", code)
			}
		})
	})
	t.Run("with no child running it exits at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pol := stopPolicy()
			pol.Restart.Backoff, pol.Restart.BackoffMax = time.Minute, time.Minute
			h, fp, _ := faultHarness(t, pol)
			c := h.child()
			c.end(Exit{Code: 3}) // crash: backoff for a minute
			sleep(time.Second)
			fp.set(always(errLost), nil)
			if code, err := h.wait(); code != 1 || err == nil {
				t.Fatalf("exit %d %v", code, err)
			}
			h.noLaunch()
		})
	})
	// An operator's stop takes over: a new signal is forwarded once; the
	// one the child already has (SIGTERM, the stop_signal) is not sent
	// twice, since a second aborts many servers mid-cleanup.
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		want []syscall.Signal
	}{
		{"an operator stop takes over", syscall.SIGINT, []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}},
		{"an operator's SIGTERM, which the child has, is not sent twice", syscall.SIGTERM, []syscall.Signal{syscall.SIGTERM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, fp, _ := faultHarness(t, stopPolicy())
				c := h.child()
				fp.set(always(errLost), nil)
				sleep(5100 * time.Millisecond)
				h.signals <- tc.sig
				synctest.Wait()
				if sigs := c.gotSignals(); !slices.Equal(sigs, tc.want) {
					t.Fatalf("child got %v, want %v", sigs, tc.want)
				}
				c.end(Exit{Code: 128 + int(tc.sig)})
				if code, err := h.wait(); code != 128+int(tc.sig) || err != nil {
					t.Fatalf("exit %d %v, want the child's status", code, err)
				}
			})
		})
	}
	t.Run("a probe hung from the start starts nothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// lost_after (1s) is up by the first hung tick (ProbeTimeout,
			// 2s): the run ends there, and no child is started only to
			// be stopped at once.
			pol := stopPolicy()
			pol.Watch.LostAfter = time.Second
			stuck := make(chan struct{})
			defer close(stuck)
			fp := &flakyProbe{hang: stuck}
			h := startHarness(t, pol, func(_ *Config, d *Deps) { fp.fakeProbe, d.Probe = d.Probe.(*fakeProbe), fp })
			if code, err := h.wait(); code != 1 || err == nil || !strings.Contains(err.Error(), `on_gpu_lost = "stop"`) {
				t.Fatalf("exit %d %v, want 1 and an error naming on_gpu_lost", code, err)
			}
			h.noLaunch()
		})
	})
	t.Run("keep never stops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Lost from the start: the child starts without data (where
			// it aimed) and counts as running once a probe tick is done.
			h, _, _ := faultHarnessFailing(t, testPolicy(), always(errLost))
			c := h.child()
			if got := c.env("GPUGUARD_PROFILE"); got != "fp16" {
				t.Fatalf("started blind in %s, want the first profile", got)
			}
			sleep(10 * time.Minute)
			if len(c.gotSignals()) != 0 || len(h.rec.named(api.EventGiveUp)) != 0 {
				t.Fatal("on_gpu_lost = keep stopped the child")
			}
			if st := h.sup.Status(); st.State != api.StateRunning {
				t.Fatalf("state %s after 10 minutes, want running", st.State)
			}
			h.signals <- syscall.SIGTERM
			synctest.Wait()
			c.end(Exit{Code: 7})
			if code, _ := h.wait(); code != 7 {
				t.Fatalf("exit %d, want the child's 7", code)
			}
		})
	})
}

// injectedAlarm is a hung deadline whose fires the test sends (fire); its
// Reset and Stop arm nothing.
type injectedAlarm struct{ fire chan time.Time }

func (a injectedAlarm) C() <-chan time.Time { return a.fire }
func (injectedAlarm) Stop() bool            { return true }
func (injectedAlarm) Reset(time.Duration)   {}
func (injectedAlarm) Close() error          { return nil }

// TestStaleHungFireIgnored: a kernel alarm may deliver a hung deadline's
// fire from before a result moved the deadline on; the loop ignores a
// fire before the deadline in force and reports one at or after it.
func TestStaleHungFireIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hung := injectedAlarm{fire: make(chan time.Time)}
		made := 0
		fp, m := &flakyProbe{}, &meter{}
		h := startHarness(t, testPolicy(), func(c *Config, d *Deps) {
			fp.fakeProbe = d.Probe.(*fakeProbe)
			d.Probe, d.Meter = fp, m
			d.Alarm = func() sense.Alarm {
				made++
				if made == 2 { // NewPacer makes the sampler's first, then the hung deadline's
					return hung
				}
				return sense.NewRuntimeAlarm()
			}
		})
		c := h.child()
		sleep(time.Second)
		hung.fire <- time.Now() // the deadline is a probe timeout ahead: stale
		synctest.Wait()
		if pe := h.rec.named(api.EventProbeError); len(pe) != 0 || m.errors() != 0 {
			t.Fatalf("a stale fire was reported: %+v, %d errors", pe, m.errors())
		}
		hung.fire <- time.Now().Add(time.Hour) // past any deadline: a hung call
		synctest.Wait()
		if pe := h.rec.named(api.EventProbeError); len(pe) != 1 || m.errors() != 1 {
			t.Fatalf("a due fire: %+v, %d errors, want one report", pe, m.errors())
		}
		c.end(Exit{})
		h.wait()
	})
}
