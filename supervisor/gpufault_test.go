package supervisor

import (
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/sense"
)

// GPU faults (Xid events) as the loop sees them: journaled and counted,
// critical ones mark the GPU faulted, and a child exit while a GPU is
// faulted, or within sense.FaultWindow of a critical event, is a gpu_fault exit.

// xidHarness is a harness whose Deps carry a fault channel.
func xidHarness(t *testing.T, onFault string) (*harness, chan gpu.Fault) {
	pol := testPolicy()
	pol.Restart.OnGPUFault = onFault
	faults := make(chan gpu.Fault, 4)
	h := startHarness(t, pol, func(_ *Config, d *Deps) { d.Faults = faults })
	return h, faults
}

// xid delivers one fault on the fake GPU and lets the loop take it.
func xid(faults chan gpu.Fault, n uint64) {
	faults <- gpu.Fault{UUID: "GPU-fake-0", Index: 0, Xid: n, Time: time.Now()}
	synctest.Wait()
}

func checkFaultEvent(t *testing.T, h *harness, want int) {
	t.Helper()
	evs := h.rec.named(api.EventGPUFault)
	if len(evs) == 0 {
		t.Fatal("no gpu_fault event")
	}
	ev := evs[len(evs)-1]
	if ev.GPU != "GPU-fake-0" || ev.GPUIndex == nil || *ev.GPUIndex != 0 || ev.Xid != want || !strings.Contains(ev.Detail, "Xid") {
		t.Errorf("gpu_fault event %+v, want GPU-fake-0, index 0, Xid %d and a detail", ev, want)
	}
}

// TestGPUFaultStop: a child that dies after Xid 79 (with an OOM message
// on stderr, even) is a gpu_fault exit: gpuguard gives up with exit 1 and
// reason gpu_fault and starts nothing.
func TestGPUFaultStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultStop)
		c := h.child()
		h.probe.setErr(errLost)
		xid(faults, 79)
		checkFaultEvent(t, h, 79)
		c.end(Exit{Code: 1, Stderr: []byte("RuntimeError: CUDA error: out of memory\n")})
		code, err := h.wait()
		if code != 1 || err == nil || !strings.Contains(err.Error(), "Xid 79") {
			t.Fatalf("got %d %v, want exit 1 naming Xid 79", code, err)
		}
		g := h.rec.named(api.EventGiveUp)
		if len(g) != 1 || g[0].Reason != api.ReasonGPUFault {
			t.Fatalf("giveup events %+v, want one with reason gpu_fault", g)
		}
		if n := len(h.rec.named(api.EventOOM)) + len(h.rec.named(api.EventRestart)); n != 0 {
			t.Errorf("%d oom/restart events: a GPU fault is never an OOM or a crash", n)
		}
		h.noLaunch()
	})
}

// TestGPUFaultRestart: with on_gpu_fault = "restart" the child is
// restarted in the same profile, after the backoff and only once the GPU
// answers again, with GPUGUARD_LAST_EXIT=gpu_fault.
func TestGPUFaultRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultRestart)
		c := h.child()
		h.probe.setErr(errLost)
		xid(faults, 79)
		c.end(Exit{Code: -1, Signal: syscall.SIGABRT})
		time.Sleep(30 * time.Second) // the backoff is long over; the GPU still does not answer
		synctest.Wait()
		h.noLaunch()
		r := h.rec.named(api.EventRestart)
		if len(r) != 1 || r[0].Reason != api.ReasonGPUFault || r[0].From != "fp16" || r[0].To != "fp16" {
			t.Fatalf("restart events %+v, want one gpu_fault restart in fp16", r)
		}
		if st := h.sup.Status().State; st != api.StateWaiting {
			t.Errorf("state %s while the GPU is lost, want waiting", st)
		}
		back := time.Now()
		h.probe.setErr(nil)
		c2 := h.child()
		if waited := time.Since(back); waited > time.Second {
			t.Errorf("restarted %s after the GPU answered again", waited)
		}
		if c2.env("GPUGUARD_LAST_EXIT") != "gpu_fault" || c2.env("GPUGUARD_PROFILE") != "fp16" || c2.env("GPUGUARD_RESTARTS") != "1" {
			t.Fatalf("restarted with LAST_EXIT=%s PROFILE=%s RESTARTS=%s", c2.env("GPUGUARD_LAST_EXIT"),
				c2.env("GPUGUARD_PROFILE"), c2.env("GPUGUARD_RESTARTS"))
		}
		c2.end(Exit{})
		if code, _ := h.wait(); code != 0 {
			t.Fatalf("code %d", code)
		}
	})
}

// TestGPUFaultRestartBackoff: a GPU that answers again at once still waits
// out the backoff.
func TestGPUFaultRestartBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultRestart)
		c := h.child()
		xid(faults, 48)
		t0 := time.Now()
		c.end(Exit{Code: 1})
		c = h.child()
		if waited := time.Since(t0); waited < time.Second {
			t.Errorf("restarted after %s; backoff is 1s", waited)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestGPUFaultWindow: a GPU that keeps answering after a critical Xid is no
// longer faulted, but a child exit within 10s of the event is still the
// fault's; one later is a crash again.
func TestGPUFaultWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultRestart)
		c := h.child()
		xid(faults, 94)
		time.Sleep(sense.FaultWindow - time.Second)
		c.end(Exit{Code: 1})
		c = h.child()
		if got := c.env("GPUGUARD_LAST_EXIT"); got != "gpu_fault" {
			t.Fatalf("exit %s after the event: LAST_EXIT=%s, want gpu_fault", sense.FaultWindow-time.Second, got)
		}
		xid(faults, 94)
		time.Sleep(sense.FaultWindow + time.Second)
		c.end(Exit{Code: 1})
		c = h.child()
		if got := c.env("GPUGUARD_LAST_EXIT"); got != "crash" {
			t.Fatalf("exit %s after the event: LAST_EXIT=%s, want crash", sense.FaultWindow+time.Second, got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestGPUFaultedUntilAnswers: while the GPU does not answer, an exit long
// after the event is still the fault's.
func TestGPUFaultedUntilAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultStop)
		c := h.child()
		h.probe.setErr(errLost)
		xid(faults, 79)
		time.Sleep(time.Minute)
		c.end(Exit{Code: 1})
		if code, _ := h.wait(); code != 1 || len(h.rec.named(api.EventGiveUp)) != 1 {
			t.Fatalf("code %d, giveups %d: a minute later the GPU is still faulted", code, len(h.rec.named(api.EventGiveUp)))
		}
	})
}

// TestApplicationXid: Xid 13 is journaled and counted only: the child is
// not signalled, and its later exit is a crash like any other.
func TestApplicationXid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultStop)
		c := h.child()
		xid(faults, 13)
		checkFaultEvent(t, h, 13)
		if s := c.gotSignals(); len(s) != 0 {
			t.Errorf("the child got %v after an application Xid", s)
		}
		c.end(Exit{Code: 1})
		c2 := h.child()
		if got := c2.env("GPUGUARD_LAST_EXIT"); got != "crash" {
			t.Fatalf("LAST_EXIT=%s after an application Xid, want crash", got)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestGPUFaultWhileStopping: an operator's stop wins; the exit is the
// child's status, as for any stop.
func TestGPUFaultWhileStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultStop)
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{Code: 0}) })
		xid(faults, 79)
		h.signals <- syscall.SIGTERM
		if code, err := h.wait(); code != 0 || err != nil {
			t.Fatalf("got %d %v, want the child's 0", code, err)
		}
	})
}

// TestZeroExitAfterFault: a child that exits 0 right after a critical Xid
// (a server that shuts itself down "cleanly" when its GPU fails) is a
// gpu_fault exit like any other: with on_gpu_fault = "stop" gpuguard exits
// 1, never 0, which would tell the service manager all is well.
func TestZeroExitAfterFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultStop)
		c := h.child()
		xid(faults, 79)
		c.end(Exit{})
		if code, err := h.wait(); code != 1 || err == nil {
			t.Fatalf("got %d %v, want 1 and the fault", code, err)
		}
		if g := h.rec.named(api.EventGiveUp); len(g) != 1 || g[0].Reason != api.ReasonGPUFault {
			t.Fatalf("giveup events %+v, want one with reason gpu_fault", g)
		}
	})
}

// TestFaultBeforeTheChildStarted: a child started after the GPU answered
// again did not meet the fault: its exit, within the 10 s window of the
// event, is its own (here a clean end), not the fault's.
func TestFaultBeforeTheChildStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, faults := xidHarness(t, policy.OnGPUFaultRestart)
		c := h.child()
		xid(faults, 79)
		c.end(Exit{Code: 1})
		c = h.child() // restarted once the GPU answered, within the window
		c.end(Exit{})
		if code, err := h.wait(); code != 0 || err != nil {
			t.Fatalf("got %d %v, want the restarted child's clean 0", code, err)
		}
		if r := h.rec.named(api.EventRestart); len(r) != 1 {
			t.Fatalf("restart events %+v, want the one after the fault", r)
		}
	})
}
