package supervisor

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/policy"
)

func TestStartsInBestProfileWithEnvAndArgs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		if got, want := c.spec.Argv, []string{"server", "--batch", "32"}; !slices.Equal(got, want) {
			t.Errorf("argv %q, want %q", got, want)
		}
		for k, want := range map[string]string{"MAX_BATCH": "32", "GPUGUARD_PROFILE": "fp16", "GPUGUARD_LEVEL": "0",
			"GPUGUARD_LEVELS": "3", "GPUGUARD_RESTARTS": "0", "GPUGUARD_LAST_EXIT": "none", "GPUGUARD_NAME": "t",
			"GPUGUARD_CHECKPOINT": "/state/checkpoint", "GPUGUARD_STATE": "/state/state.json",
			"GPUGUARD_SOCKET": "/run/t.sock", "PATH": "/bin"} {
			if got := c.env(k); got != want {
				t.Errorf("env %s=%q, want %q", k, got, want)
			}
		}
		if n := countKey(c.spec.Env, "MAX_BATCH"); n != 1 {
			t.Errorf("MAX_BATCH appears %d times in the env; the profile's value must replace gpuguard's", n)
		}
		if st := h.rec.lastState(); st.Level != 0 || st.Profile != "fp16" || st.Seq != 1 {
			t.Errorf("state file at start: %+v", st)
		}
		if h.rec.rotations != 0 {
			t.Error("the first start must not rotate the checkpoint")
		}
		c.end(Exit{Code: 0})
		if code, err := h.wait(); code != 0 || err != nil {
			t.Fatalf("exit 0 must end gpuguard with 0, got %d %v", code, err)
		}
	})
}

func countKey(env []string, key string) int {
	n := 0
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			n++
		}
	}
	return n
}

func TestStartsInBestProfileThatFits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), func(c *Config, d *Deps) {
			p := d.Probe.(*fakeProbe)
			p.setUsed(6 * gib) // 6 + 10 > 16 x 0.9; 6 + 6 fits
		})
		c := h.child()
		if got := c.env("GPUGUARD_PROFILE"); got != "int8" {
			t.Fatalf("started in %s, want int8 (fp16 needs do not fit)", got)
		}
		c.end(Exit{Code: 0})
		h.wait()
	})
}

func TestWhenFull(t *testing.T) {
	full := func(c *Config, d *Deps) { d.Probe.(*fakeProbe).setUsed(15 * gib) }
	t.Run("exit", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pol := testPolicy()
			pol.Profiles[2].Needs = 2 * gib
			pol.Restart.WhenFull = policy.WhenFullExit
			h := startHarness(t, pol, full)
			code, err := h.wait()
			if code != 75 || !IsNoFit(err) {
				t.Fatalf("got %d %v, want 75 and a no-fit error", code, err)
			}
		})
	})
	t.Run("lowest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pol := testPolicy()
			pol.Profiles[2].Needs = 2 * gib
			pol.Restart.WhenFull = policy.WhenFullLowest
			h := startHarness(t, pol, full)
			c := h.child()
			if got := c.env("GPUGUARD_PROFILE"); got != "int4" {
				t.Fatalf("started in %s, want the last profile", got)
			}
			// Its fit names where it started, though nothing fitted.
			synctest.Wait() // journaled once Launch has returned
			fits := h.rec.named(api.EventFit)
			if len(fits) != 1 || fits[0].To != "int4" || fits[0].Profile != "int4" || fits[0].Level != 2 ||
				len(fits[0].Tried) != 3 || fits[0].Tried[2].Fits {
				t.Fatalf("fit events %+v", fits)
			}
			c.end(Exit{})
			h.wait()
		})
	})
	t.Run("wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pol := testPolicy()
			pol.Profiles[2].Needs = 2 * gib
			h := startHarness(t, pol, full)
			time.Sleep(3 * time.Second)
			synctest.Wait()
			h.noLaunch()
			if st := h.sup.Status(); st.State != api.StateWaiting {
				t.Fatalf("state %s, want waiting", st.State)
			}
			if len(h.rec.named(api.EventWaiting)) != 1 {
				t.Fatal("waiting must be journaled once")
			}
			h.probe.setUsed(0)
			c := h.child()
			if got := c.env("GPUGUARD_PROFILE"); got != "fp16" {
				t.Fatalf("started in %s once memory freed, want fp16", got)
			}
			c.end(Exit{})
			h.wait()
		})
	})
}

// TestLiveStepDown: a watermark step into a live profile rewrites the
// state file, signals the child once and is published; status shows the
// step by the time the child is sent the notify signal, so that whoever
// hears of the change from the child finds it in status.
func TestLiveStepDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h := startHarness(t, pol, nil)
		c := h.child()
		seen := make(chan int, 4) // status's level as the child is signalled
		c.setOnSignal(func(*fakeChild, syscall.Signal) { seen <- h.sup.Status().Level })
		h.probe.setUsed(15 * gib) // 0.94 > 0.90
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		st := h.rec.lastState()
		if st.Level != 1 || st.Profile != "int8" || st.Env["MAX_BATCH"] != "16" || st.Seq != 2 {
			t.Fatalf("state file after the step: %+v", st)
		}
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGUSR1}) {
			t.Fatalf("child got %v, want one SIGUSR1", sigs)
		}
		if len(seen) != 1 {
			t.Fatalf("%d signals seen, want the step's one", len(seen))
		}
		if level := <-seen; level != 1 {
			t.Fatalf("status said level %d as the child heard of the step to 1", level)
		}
		if p := h.rec.published; len(p) == 0 || p[len(p)-1].Type != "profile" || p[len(p)-1].Level != 1 {
			t.Fatalf("published %+v", p)
		}
		ev := h.rec.named(api.EventStepDown)
		if len(ev) != 1 || ev[0].Reason != api.ReasonWatermark || ev[0].From != "fp16" || ev[0].To != "int8" {
			t.Fatalf("stepdown events %+v", ev)
		}
		// Within grace nothing more happens, even above high.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if len(h.rec.named(api.EventStepDown)) != 1 {
			t.Fatal("a second step within grace")
		}
		if st := h.sup.Status(); st.Profile != "int8" || st.Level != 1 || st.State != api.StateRunning {
			t.Fatalf("status %+v", st)
		}
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		c.end(Exit{Code: 0})
		h.wait()
	})
}

func TestStepIntoNonLiveProfileRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[1].Live = false
		h := startHarness(t, pol, nil)
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
			if sig == syscall.SIGTERM {
				h.probe.setUsed(0) // its memory is freed
				c.end(Exit{Code: 0})
			}
		})
		h.probe.setUsed(15 * gib)
		c2 := h.child()
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGTERM}) {
			t.Fatalf("first child got %v, want the stop signal", sigs)
		}
		if got := c2.env("GPUGUARD_LAST_EXIT"); got != "watermark" {
			t.Errorf("LAST_EXIT=%s, want watermark", got)
		}
		if got := c2.env("GPUGUARD_PROFILE"); got != "int8" {
			t.Errorf("restarted in %s, want int8", got)
		}
		if got := c2.env("GPUGUARD_RESTARTS"); got != "1" {
			t.Errorf("RESTARTS=%s, want 1", got)
		}
		r := h.rec.named(api.EventRestart)
		if len(r) != 1 || r[0].Reason != api.ReasonWatermark {
			t.Fatalf("restart events %+v", r)
		}
		if st := h.rec.lastState(); st.Reason != "restart after watermark" {
			t.Errorf("state reason %q, want %q", st.Reason, "restart after watermark")
		}
		c2.end(Exit{})
		h.wait()
	})
}

func TestOOMRestartsOneProfileLower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		start := time.Now()
		c.end(Exit{Code: 1, Stderr: []byte("Traceback...\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")})
		c2 := h.child()
		if waited := time.Since(start); waited < time.Second {
			t.Errorf("restarted after %s; backoff is 1s", waited)
		}
		if c2.env("GPUGUARD_PROFILE") != "int8" || c2.env("GPUGUARD_LAST_EXIT") != "oom" || c2.env("GPUGUARD_RESTARTS") != "1" {
			t.Fatalf("after OOM: profile %s last_exit %s restarts %s", c2.env("GPUGUARD_PROFILE"), c2.env("GPUGUARD_LAST_EXIT"), c2.env("GPUGUARD_RESTARTS"))
		}
		if h.rec.rotations != 1 {
			t.Errorf("checkpoint rotations %d, want 1 before the restart", h.rec.rotations)
		}
		r := h.rec.named(api.EventRestart)
		if len(r) != 1 || r[0].Reason != "oom" || r[0].From != "fp16" || r[0].To != "int8" {
			t.Fatalf("restart events %+v", r)
		}
		if len(h.rec.named(api.EventOOM)) != 1 {
			t.Fatal("no oom event")
		}
		// OOM at the last profile restarts in the last profile.
		c2.end(Exit{Code: 42})
		c3 := h.child()
		c3.end(Exit{Code: 42})
		c4 := h.child()
		if got := c4.env("GPUGUARD_PROFILE"); got != "int4" {
			t.Fatalf("OOM at the last profile restarted in %s", got)
		}
		c4.end(Exit{})
		h.wait()
	})
}

func TestSocketOOMReportCountsAsOOM(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		h.sup.MarkOOM("allocator said no")
		c.end(Exit{Code: 0})
		c2 := h.child()
		if got := c2.env("GPUGUARD_LAST_EXIT"); got != "oom" {
			t.Fatalf("LAST_EXIT=%s after an oom report and exit 0, want oom", got)
		}
		c2.end(Exit{})
		if code, _ := h.wait(); code != 0 {
			t.Fatalf("code %d", code)
		}
	})
}

func TestCrashRestartsSameProfileWithBackoffAndGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Restart.MaxRestarts = 3
		h := startHarness(t, pol, nil)
		var gaps []time.Duration
		c := h.child()
		for range 3 {
			t0 := time.Now()
			c.end(Exit{Code: 3})
			c = h.child()
			gaps = append(gaps, time.Since(t0).Round(time.Second))
			if c.env("GPUGUARD_PROFILE") != "fp16" || c.env("GPUGUARD_LAST_EXIT") != "crash" {
				t.Fatalf("crash restart in %s last_exit %s", c.env("GPUGUARD_PROFILE"), c.env("GPUGUARD_LAST_EXIT"))
			}
		}
		if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(gaps, want) {
			t.Errorf("backoffs %v, want %v", gaps, want)
		}
		c.end(Exit{Code: -1, Signal: syscall.SIGSEGV})
		code, err := h.wait()
		if code != 128+int(syscall.SIGSEGV) || err != nil {
			t.Fatalf("give up: got %d %v, want the child's status %d", code, err, 128+int(syscall.SIGSEGV))
		}
		if len(h.rec.named(api.EventGiveUp)) != 1 {
			t.Fatal("no giveup event")
		}
		if h.sup.Status().State != api.StateFatal {
			t.Fatalf("state %s, want fatal", h.sup.Status().State)
		}
	})
}

func TestCrashWithoutOnCrashEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Restart.OnCrash = false
		h := startHarness(t, pol, nil)
		h.child().end(Exit{Code: 7})
		if code, _ := h.wait(); code != 7 {
			t.Fatalf("code %d, want 7", code)
		}
	})
}

func TestStopSignalForwardedOnceThenKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		h.signals <- syscall.SIGURG // never forwarded
		h.signals <- syscall.SIGINT
		synctest.Wait()
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGINT}) {
			t.Fatalf("child got %v, want exactly one SIGINT", sigs)
		}
		if st := h.sup.Status(); st.State != api.StateStopping {
			t.Fatalf("state %s, want stopping", st.State)
		}
		time.Sleep(3*time.Second + time.Millisecond) // stop_timeout
		synctest.Wait()
		code, _ := h.wait()
		if code != 128+int(syscall.SIGKILL) || !c.killed {
			t.Fatalf("code %d killed %v: the group must be SIGKILLed after stop_timeout", code, c.killed)
		}
	})
}

func TestStopExitsWithChildStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		c.end(Exit{Code: 0})
		if code, _ := h.wait(); code != 0 {
			t.Fatalf("code %d, want the child's 0", code)
		}
	})
}

func TestSecondSignalEscalates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		h.signals <- syscall.SIGINT
		h.signals <- syscall.SIGINT
		code, _ := h.wait()
		if !c.killed || code != 128+int(syscall.SIGKILL) {
			t.Fatalf("second Ctrl-C: killed %v code %d", c.killed, code)
		}
		if sigs := c.gotSignals(); len(sigs) != 1 {
			t.Fatalf("forwarded %v; the second signal escalates instead", sigs)
		}
	})
}

func TestStopDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		h.child().end(Exit{Code: 1})
		synctest.Wait()
		if st := h.sup.Status(); st.State != api.StateBackoff {
			t.Fatalf("state %s, want backoff", st.State)
		}
		h.signals <- syscall.SIGTERM
		if code, _ := h.wait(); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("code %d, want 143", code)
		}
	})
}

func TestCriticalRestartsLower(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h := startHarness(t, pol, nil)
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
			if sig == syscall.SIGTERM {
				c.end(Exit{Code: 143})
			}
		})
		h.probe.setUsed(16 * gib) // 1.0 >= critical
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if h.rec.lastState().Level != 1 {
			t.Fatal("no live step down first")
		}
		c2 := h.child() // after grace, still critical: restart in int4
		if got := c2.env("GPUGUARD_PROFILE"); got != "int4" {
			t.Fatalf("critical restart into %s, want int4", got)
		}
		steps := h.rec.named(api.EventStepDown)
		if len(steps) != 2 || steps[1].Reason != api.ReasonCritical {
			t.Fatalf("stepdowns %+v", steps)
		}
		c2.end(Exit{})
		h.wait()
	})
}

func TestObserveNeverSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h := startHarness(t, pol, func(c *Config, d *Deps) { c.Observe = true })
		c := h.child()
		h.probe.setUsed(16 * gib)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		h.noLaunch()
		if sigs := c.gotSignals(); len(sigs) != 0 {
			t.Fatalf("observe mode signalled the child: %v", sigs)
		}
		if len(h.rec.named(api.EventStepDown)) != 0 {
			t.Fatal("observe mode stepped down")
		}
		obs := h.rec.named(api.EventObserve)
		if len(obs) == 0 || obs[0].Reason != api.ReasonObserve {
			t.Fatalf("observe events %+v", obs)
		}
		if st := h.sup.Status(); !st.Observe || st.Level != 0 {
			t.Fatalf("status %+v", st)
		}
		c.end(Exit{})
		h.wait()
	})
}

func TestManualStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h := startHarness(t, pol, nil)
		c := h.child()
		ctx := context.Background()
		if _, err := h.sup.Step(ctx, "up"); err == nil {
			t.Fatal("step up at the first profile must fail")
		}
		p, err := h.sup.Step(ctx, "down")
		if err != nil || p != "int8" {
			t.Fatalf("step down: %q %v", p, err)
		}
		if h.rec.lastState().Level != 1 {
			t.Fatal("state file not written before the reply")
		}
		steps := h.rec.named(api.EventStepDown)
		if len(steps) != 1 || steps[0].Reason != api.ReasonManual {
			t.Fatalf("stepdowns %+v", steps)
		}
		if _, err := h.sup.Step(ctx, "down"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.sup.Step(ctx, "down"); err == nil {
			t.Fatal("step down past the last profile must fail")
		}
		p, err = h.sup.Step(ctx, "up")
		if err != nil || p != "int8" {
			t.Fatalf("step up: %q %v", p, err)
		}
		c.end(Exit{})
		h.wait()
	})
}

func TestManualStepIntoNonLiveRepliesAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[1].Live = false
		h := startHarness(t, pol, nil)
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{}) })
		var got string
		done := make(chan struct{})
		go func() {
			got, _ = h.sup.Step(context.Background(), "down")
			close(done)
		}()
		c2 := h.child()
		<-done
		if got != "int8" || c2.env("GPUGUARD_PROFILE") != "int8" {
			t.Fatalf("reply %q, child in %s", got, c2.env("GPUGUARD_PROFILE"))
		}
		// The step was manual: the state file says so, although the
		// child's LAST_EXIT is watermark (gpuguard stopped it for a step).
		if st := h.rec.lastState(); st.Reason != "restart after manual step" {
			t.Errorf("state reason %q, want %q", st.Reason, "restart after manual step")
		}
		if got := c2.env("GPUGUARD_LAST_EXIT"); got != "watermark" {
			t.Errorf("LAST_EXIT=%s, want watermark", got)
		}
		c2.end(Exit{})
		h.wait()
	})
}

func TestProbeErrorsMakeNoDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Profiles[0].Live = true
		h := startHarness(t, pol, nil)
		c := h.child()
		synctest.Wait()
		h.probe.setErr(errLost)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if len(h.rec.named(api.EventProbeError)) != 1 {
			t.Fatalf("probe errors journaled %d times in one streak, want once", len(h.rec.named(api.EventProbeError)))
		}
		if len(c.gotSignals()) != 0 || len(h.rec.named(api.EventStepDown)) != 0 {
			t.Fatal("a decision without data")
		}
		h.probe.setErr(nil)
		h.probe.setUsed(15 * gib)
		time.Sleep(1200 * time.Millisecond)
		synctest.Wait()
		if len(h.rec.named(api.EventStepDown)) != 1 {
			t.Fatal("no step down after the probe recovered")
		}
		c.end(Exit{})
		h.wait()
	})
}

func TestWaitsForDeadChildMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), func(c *Config, d *Deps) {
			d.Owned = func(root int, pids []int) []int {
				var out []int
				for _, p := range pids {
					if p == root+500 { // the child's worker
						out = append(out, p)
					}
				}
				return out
			}
		})
		c := h.child()
		synctest.Wait()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		// The child's worker (pid+500) holds memory, is seen doing so, and
		// still holds it after the exit.
		h.probe.setProcs([]gpu.Process{{PID: c.pid + 500, Used: gib}})
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		c.end(Exit{Code: 1})
		time.Sleep(3 * time.Second) // backoff 1s, then waiting
		synctest.Wait()
		h.noLaunch()
		if st := h.sup.Status(); st.State != api.StateWaiting {
			t.Fatalf("state %s, want waiting for memory", st.State)
		}
		h.probe.setProcs([]gpu.Process{})
		c2 := h.child()
		c2.end(Exit{})
		h.wait()
	})
}

func TestAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		synctest.Wait()
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		ctx := context.Background()
		d, err := h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 10 * gib, Priority: "P1", TTL: time.Minute})
		if err != nil || d.Decision != "gpu" || d.Lease == "" {
			t.Fatalf("first reservation: %+v %v", d, err)
		}
		d2, _ := h.sup.Admission().Reserve(ctx, admission.Request{Bytes: 10 * gib, Priority: "P1", TTL: time.Minute})
		if d2.Decision != "cpu" {
			t.Fatalf("second reservation over the limit: %+v, want cpu for P1", d2)
		}
		if err := h.sup.Admission().Release(ctx, d.Lease); err != nil {
			t.Fatal(err)
		}
		if err := h.sup.Admission().Release(ctx, d.Lease); err == nil {
			t.Fatal("releasing twice must fail")
		}
		time.Sleep(200 * time.Millisecond)
		if st := h.sup.Status(); st.Leases != 0 {
			t.Fatalf("leases %d", st.Leases)
		}
		if n := len(h.rec.named(api.EventAdmission)); n != 2 {
			t.Fatalf("admission events %d, want 2", n)
		}
		c.end(Exit{})
		h.wait()
	})
}

// listingChild is a child that lists its own processes (its cgroup).
type listingChild struct {
	*fakeChild
	pids []int
}

func (c listingChild) Owned(pids []int) []int {
	var out []int
	for _, p := range pids {
		if slices.Contains(c.pids, p) {
			out = append(out, p)
		}
	}
	return out
}

type listingLauncher struct{ *fakeLauncher }

func (l listingLauncher) Launch(spec LaunchSpec) (Child, error) {
	c, err := l.fakeLauncher.Launch(spec)
	if err != nil {
		return nil, err
	}
	return listingChild{c.(*fakeChild), []int{c.PID(), 4242}}, nil
}

// TestProcessScopeUsesTheChildsOwnList: a daemon that left the process
// tree (pid 4242, in the child's cgroup) still counts as the child's.
func TestProcessScopeUsesTheChildsOwnList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		pol.Watch.Scope = policy.ScopeProcess
		pol.Watch.Quota = 4 * gib
		pol.Profiles[0].Live = true
		pol.Profiles[0].Needs, pol.Profiles[1].Needs = 0, 0
		h := startHarness(t, pol, func(c *Config, d *Deps) {
			d.Launcher = listingLauncher{d.Launcher.(*fakeLauncher)}
			d.Owned = func(root int, pids []int) []int { return nil }
		})
		c := h.child()
		h.probe.setProcs([]gpu.Process{{PID: 4242, Used: 4 * gib}, {PID: 999, Used: 8 * gib}})
		time.Sleep(1200 * time.Millisecond)
		synctest.Wait()
		if st := h.sup.Status(); st.Watermark != 1.0 || st.Level != 1 {
			t.Fatalf("watermark %.2f level %d: the daemon's 4 GiB of a 4 GiB quota must count (and nobody else's)", st.Watermark, st.Level)
		}
		c.end(Exit{})
		h.wait()
	})
}
