package supervisor

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/gpu"
	"github.com/gpuguard/gpuguard/policy"
)

// TestFitEventsAndStatus: a start that skips a profile journals a fit
// event naming what it tried, and status carries the newest one.
func TestFitEventsAndStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), func(c *Config, d *Deps) { d.Probe.(*fakeProbe).setUsed(6 * gib) })
		c := h.child()
		if got := c.env("GPUGUARD_PROFILE"); got != "int8" {
			t.Fatalf("started in %s, want int8 (fp16 needs 10 GiB, 8.4 GiB room)", got)
		}
		synctest.Wait() // the fit is journaled once Launch has returned
		fits := h.rec.named(api.EventFit)
		if len(fits) != 1 || fits[0].To != "int8" || len(fits[0].Tried) != 2 || fits[0].Tried[0].Fits || !fits[0].Tried[1].Fits ||
			fits[0].Tried[0].NeedsBytes != 10*gib || !strings.Contains(fits[0].Detail, "fp16 needs 10 GiB, does not fit") {
			t.Fatalf("fit events %+v", fits)
		}
		if st := h.sup.Status(); st.Fit == nil || st.Fit.To != "int8" {
			t.Errorf("status fit %+v", st.Fit)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestNeverFitsExits75: when the smallest needs exceeds the GPU's total,
// Run ends with 75 at the first sample, whatever when_full says.
func TestNeverFitsExits75(t *testing.T) {
	for _, wf := range []string{policy.WhenFullWait, policy.WhenFullLowest, policy.WhenFullExit} {
		t.Run(wf, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pol := testPolicy()
				pol.Profiles[2].Needs = 17 * gib
				pol.Profiles[1].Needs = 18 * gib
				pol.Profiles[0].Needs = 20 * gib
				pol.Restart.WhenFull = wf
				h := startHarness(t, pol, nil)
				code, err := h.wait()
				if code != 75 || !IsNoFit(err) || !strings.Contains(err.Error(), "int4, needs 17 GiB, more than GPU 0 holds (16 GiB in all)") {
					t.Fatalf("got %d %v", code, err)
				}
				h.noLaunch()
			})
		})
	}
}

// TestStepRefusedWhenItDoesNotFit: a manual step into a profile that
// does not fit (others' usage plus its needs over high) is refused before
// the child is signalled; the child's own usage does not count against it.
func TestStepRefusedWhenItDoesNotFit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		h := startHarness(t, pol, func(c *Config, d *Deps) { d.Probe.(*fakeProbe).setUsed(6 * gib) })
		c := h.child() // int8
		// The child holds 4 GiB of its own, another tenant 6 GiB: fp16
		// (10 GiB) does not fit the 8.4 GiB room that others leave.
		h.probe.setUsed(10 * gib)
		h.probe.setProcs([]gpu.Process{{PID: c.PID(), Device: 0, Used: 4 * gib}})
		time.Sleep(time.Second)
		synctest.Wait()
		_, err := h.sup.Step(context.Background(), "up")
		if err == nil || !strings.Contains(err.Error(), "profile fp16 does not fit: it needs 10 GiB") {
			t.Fatalf("step up: %v", err)
		}
		if sigs := c.gotSignals(); len(sigs) != 0 {
			t.Fatalf("a refused step signalled the child: %v", sigs)
		}
		if n := len(h.rec.named(api.EventStepUp)); n != 0 {
			t.Fatalf("a refused step journaled %d stepups", n)
		}
		// The other tenant leaves: the child's own 4 GiB alone leaves room.
		h.probe.setUsed(4 * gib)
		time.Sleep(time.Second)
		synctest.Wait()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{}) })
		done := make(chan error, 1)
		go func() { _, err := h.sup.Step(context.Background(), "up"); done <- err }()
		c2 := h.child()
		if got := c2.env("GPUGUARD_PROFILE"); got != "fp16" {
			t.Fatalf("restarted in %s, want fp16", got)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestStepFitWithoutProcessList: on a backend that cannot say which
// processes hold memory, the child's own usage is taken to be its
// profile's needs estimate, and a step that does not fit is refused
// naming what the others use. With the probe down there is no reading to
// judge by: the same step is not refused (the start after it judges the
// fit again).
func TestStepFitWithoutProcessList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), func(c *Config, d *Deps) { d.Probe.(*fakeProbe).setUsed(6 * gib) })
		c := h.child() // int8: fp16's 10 GiB does not fit beside 6 GiB
		if got := c.env("GPUGUARD_PROFILE"); got != "int8" {
			t.Fatalf("started in %s, want int8", got)
		}
		// 11 GiB in all, 6 of them int8's estimate: the others' 5 GiB and
		// fp16's 10 are over the 14.4 GiB under high.
		h.probe.setUsed(11 * gib)
		time.Sleep(time.Second)
		synctest.Wait()
		_, err := h.sup.Step(context.Background(), "up")
		if err == nil || !strings.Contains(err.Error(), "profile fp16 does not fit: it needs 10 GiB, and GPU 0 has 9.4 GiB free under high 0.90 (5 GiB of 16 GiB used without this child)") {
			t.Fatalf("step up beside 5 GiB of others: %v", err)
		}
		if sigs := c.gotSignals(); len(sigs) != 0 {
			t.Fatalf("a refused step signalled the child: %v", sigs)
		}

		h.probe.setErr(errors.New("the GPU stopped answering"))
		time.Sleep(time.Second)
		synctest.Wait()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{}) })
		done := make(chan error, 1)
		go func() { _, err := h.sup.Step(context.Background(), "up"); done <- err }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("step up with the probe down answered before any restart: %v", err)
		default:
		}
		c2 := h.child()
		if got := c2.env("GPUGUARD_PROFILE"); got != "fp16" {
			t.Fatalf("restarted in %s, want fp16", got)
		}
		if err := <-done; err != nil {
			t.Fatalf("step up with the probe down: %v", err)
		}
		c2.end(Exit{})
		h.wait()
	})
}
