package supervisor

import (
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
)

// TestWakeOnRequestStopped: a held request while the child is stopped
// asleep starts it again in the nearest serving profile, reason request;
// with [serve] wake = false it does not.
func TestWakeOnRequestStopped(t *testing.T) {
	for _, wake := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			pol := stopPolicy()
			pol.Serve.Wake = wake
			h := startHarness(t, pol, func(c *Config, _ *Deps) { c.StartLevel = 1 })
			c := h.child()
			c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
				if sig == syscall.SIGTERM {
					c.end(Exit{})
				}
			})
			stepTo(t, h, "down", "off")
			h.sup.Requested(false) // a request let through (none is, asleep) wakes nothing
			h.sup.Requested(true)
			synctest.Wait()
			if !wake {
				h.noLaunch()
				if st := h.sup.Status(); st.State != api.StateAsleep {
					t.Errorf("wake = false: state %s, want asleep", st.State)
				}
				h.cancel()
				h.wait()
				return
			}
			c2 := h.child()
			if got := c2.env("GPUGUARD_PROFILE"); got != "int8" {
				t.Fatalf("woken in %q, want int8", got)
			}
			ups := h.rec.named(api.EventStepUp)
			if len(ups) != 1 || ups[0].Reason != api.ReasonRequest || ups[0].To != "int8" {
				t.Fatalf("stepup events %+v", ups)
			}
			c2.end(Exit{})
			h.wait()
		})
	}
}

// TestWakeOnRequestLive: a held request wakes a server asleep through
// its actions: its leave runs and the instance serves again.
func TestWakeOnRequestLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Serve.Wake = true
		h, c, _, acts := startServing(t, pol)
		stepTo(t, h, "down", "asleep")
		h.sup.Requested(true)
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall, wakeCall}) {
			t.Fatalf("actions %v", got)
		}
		if st := h.sup.Status(); st.Profile != "int8" || st.State != api.StateRunning {
			t.Errorf("after the wake: %s %s", st.Profile, st.State)
		}
		if ups := h.rec.named(api.EventStepUp); len(ups) != 1 || ups[0].Reason != api.ReasonRequest {
			t.Errorf("stepup events %+v", ups)
		}
		h.noLaunch()
		c.end(Exit{})
		h.wait()
	})
}

// TestIdleSleep: no request for [serve] idle steps down to the first
// serving = false profile, reason idle; a request in between restarts
// the count.
func TestIdleSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Serve.Idle = 10 * time.Second
		h, c, _, acts := startServing(t, pol)
		h.sup.Healthy(1) // the idle count starts once the child is ready
		time.Sleep(8 * time.Second)
		h.sup.Requested(false)
		time.Sleep(8 * time.Second) // 16 s since the start, 8 s since the request
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v before idle had passed since the last request", got)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Fatalf("actions %v after idle", got)
		}
		downs := h.rec.named(api.EventStepDown)
		if len(downs) != 1 || downs[0].Reason != api.ReasonIdle || downs[0].To != "asleep" {
			t.Fatalf("stepdown events %+v", downs)
		}
		if st := h.sup.Status(); st.State != api.StateAsleep {
			t.Errorf("state %s, want asleep", st.State)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestIdleCountsFromReady: a child that has not answered its health check
// is loading, not idle: however long that takes, [serve] idle does not
// put it to sleep, and once it is ready the count starts from then.
func TestIdleCountsFromReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Serve.Idle = 10 * time.Second
		h, c, _, acts := startServing(t, pol)
		time.Sleep(30 * time.Second) // loading its weights: never healthy yet
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v before the child was ready", got)
		}
		h.sup.Healthy(1)
		time.Sleep(8 * time.Second)
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v 8 s after the child was ready (idle 10 s)", got)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Fatalf("actions %v 11 s after the child was ready", got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestLiveWakeTakesTheStartClaim: on a shared GPU a server woken live
// takes back the memory it freed, as a start does, so it waits for the
// one-start-at-a-time claim: no wake while another tenant starts (and no
// "starting" flag left up after a refused claim), then the wake once the
// claim is granted, with this instance starting until it settles.
func TestLiveWakeTakesTheStartClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		var llmStarting atomic.Bool
		fc.ClaimFunc = func(gpus []string) api.StartOutcome {
			if llmStarting.Load() {
				return api.StartOutcome{Holder: "llm", GPU: fakeGPU}
			}
			return api.StartOutcome{Granted: true}
		}
		pol := sleepPolicy()
		pol.Serve.Wake = true
		pol.Watch.Settle = 2 * time.Second
		h, c, _, acts := startServing(t, pol, withCoord(fc))
		time.Sleep(time.Minute) // the start settles; its claim ends
		synctest.Wait()
		if h.sup.Admission().TenantInfo().Starting {
			t.Fatal("still starting a minute after the start")
		}
		stepTo(t, h, "down", "asleep")
		llmStarting.Store(true)
		before := fc.Claimed()
		h.sup.Requested(true)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Fatalf("actions %v while another tenant starts: want the sleep only, no wake", got)
		}
		if fc.Claimed() <= before {
			t.Fatal("the wake claimed nothing")
		}
		if h.sup.Admission().TenantInfo().Starting {
			t.Fatal("starting after a refused claim: the other tenant would wait on us")
		}
		llmStarting.Store(false)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall, wakeCall}) {
			t.Fatalf("actions %v once the claim is granted", got)
		}
		if st := h.sup.Status(); st.Profile != "int8" || st.State != api.StateRunning {
			t.Errorf("after the wake: %s %s", st.Profile, st.State)
		}
		if !h.sup.Admission().TenantInfo().Starting {
			t.Error("not starting right after the wake: the woken server's memory has not settled")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if h.sup.Admission().TenantInfo().Starting {
			t.Error("still starting a minute after the wake")
		}
		h.noLaunch()
		c.end(Exit{})
		h.wait()
	})
}

// TestIdleNeverCutsAStream: a request in flight (a stream) or held keeps
// the server from idle however long it lasts, and the idle count starts
// again from the end of its last chunk, not from its arrival; status's
// in_flight and idle_seconds say the same.
func TestIdleNeverCutsAStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Serve.Idle = 10 * time.Second
		h, c, door, acts := startServing(t, pol)
		h.sup.Healthy(1)
		time.Sleep(5 * time.Second)
		h.sup.Requested(false)
		door.answering(1)            // a stream begins ...
		time.Sleep(40 * time.Second) // ... and lasts 40 s, four times idle
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v while a stream was in flight", got)
		}
		if st := h.sup.Status(); st.InFlight != 1 || st.IdleSeconds == nil || *st.IdleSeconds != 0 {
			t.Fatalf("mid-stream: in_flight %d, idle_seconds %v; want 1 and 0", st.InFlight, st.IdleSeconds)
		}
		door.answering(0) // its last chunk
		door.mu.Lock()
		door.held = 1 // a request held (the child not ready for it) is not idle either
		door.mu.Unlock()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v while a request was held", got)
		}
		door.mu.Lock()
		door.held = 0
		door.lastEnd = time.Now()
		door.mu.Unlock()
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v 9 s after the last answer", got)
		}
		if st := h.sup.Status(); st.InFlight != 0 || st.IdleSeconds == nil || *st.IdleSeconds < 8.9 || *st.IdleSeconds > 9.5 {
			t.Fatalf("idle: in_flight %d, idle_seconds %v; want 0 and 9", st.InFlight, st.IdleSeconds)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Fatalf("actions %v after idle since the last answer", got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestStatusIdleWithoutDoor: without a front door, in_flight is 0 and
// idle_seconds null.
func TestStatusIdleWithoutDoor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		if st := h.sup.Status(); st.InFlight != 0 || st.IdleSeconds != nil {
			t.Fatalf("in_flight %d, idle_seconds %v; want 0 and null", st.InFlight, st.IdleSeconds)
		}
		c.end(Exit{})
		h.wait()
	})
}

// heldOnce is a door whose one held request is let go right after the
// first time it is counted.
type heldOnce struct {
	*fakeDoor
	reads int
}

func (d *heldOnce) Held() int {
	d.reads++
	if d.reads == 1 {
		return 1
	}
	return 0
}

// TestStatusReadsHeldOnce: the status object's held and idle_seconds come
// from one reading of the door: a request held is never beside an idle
// server.
func TestStatusReadsHeldOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		pol := testPolicy()
		sup, err := New(Config{Name: "t", Policy: pol, Command: pol.Command},
			Deps{Probe: newFakeProbe(16 * gib), Launcher: newFakeLauncher(), WriteState: rec.writeState, RotateCheckpoint: rec.rotate,
				Door: &heldOnce{fakeDoor: newFakeDoor()}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		st := sup.Status()
		if st.IdleSeconds == nil {
			t.Fatal("idle_seconds null with a door")
		}
		if st.Held != 1 || *st.IdleSeconds != 0 {
			t.Fatalf("held %d, idle_seconds %v; want 1 and 0", st.Held, *st.IdleSeconds)
		}
	})
}
