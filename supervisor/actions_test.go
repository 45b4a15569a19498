package supervisor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// fakeActions records the calls the supervisor makes and answers each
// path with the status the test set (200 when none).
type fakeActions struct {
	mu     sync.Mutex
	calls  []string // METHOD URL
	status map[string]int
}

func (f *fakeActions) Call(_ context.Context, c ActionCall) ActionResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c.Method+" "+c.URL)
	code := 200
	if s, ok := f.status[c.URL]; ok {
		code = s
	}
	if code == 0 {
		return ActionResult{Err: syscall.ECONNREFUSED, Took: time.Millisecond}
	}
	if code/100 != 2 {
		return ActionResult{Status: code, Err: errors.New("answered " + "non-2xx"), Took: time.Millisecond}
	}
	return ActionResult{Status: code, Took: time.Millisecond}
}

func (f *fakeActions) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

const upstream = "http://127.0.0.1:8001"

// sleepCall and wakeCall are the calls of sleepPolicy's asleep profile,
// as fakeActions records them: its enter and its leave.
const (
	sleepCall = "POST " + upstream + "/sleep?level=1&mode=wait"
	wakeCall  = "POST " + upstream + "/wake_up"
)

// sleepPolicy is testPolicy with a third profile that sleeps through
// actions.
func sleepPolicy() *policy.Policy {
	pol := testPolicy()
	pol.Serve.Upstream = upstream
	pol.Profiles[2] = policy.Profile{Name: "asleep", Live: true, NotServing: true, Env: map[string]string{"MAX_BATCH": "8"},
		Enter: []policy.Action{{Method: "POST", Path: "/sleep?level=1&mode=wait", Timeout: time.Minute}},
		Leave: []policy.Action{{Method: "POST", Path: "/wake_up", Timeout: time.Minute}}}
	return pol
}

// startServing runs pol from level 1 behind a front door whose drain is
// over at once (no request in flight) and with server actions, and waits
// for the child, which catches the notify signal; more changes the
// harness further (withCoord).
func startServing(t *testing.T, pol *policy.Policy, more ...func(*Config, *Deps)) (*harness, *fakeChild, *fakeDoor, *fakeActions) {
	t.Helper()
	door, acts := newFakeDoor(), &fakeActions{}
	close(door.drain)
	h := startHarness(t, pol, func(c *Config, d *Deps) {
		c.StartLevel = 1
		d.Door, d.Actions = door, acts
		for _, m := range more {
			m(c, d)
		}
	})
	c := h.child()
	c.setHandler(true)
	return h, c, door, acts
}

// TestActionsLiveSleepAndWake: a step into a serving = false profile with
// actions drains the door first, then calls enter; the instance is asleep
// with the same child and the door stays shut. The step back calls leave
// and reopens the door. No restart happens.
func TestActionsLiveSleepAndWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		door, acts := newFakeDoor(), &fakeActions{}
		h := startHarness(t, sleepPolicy(), func(c *Config, d *Deps) { c.StartLevel = 1; d.Door, d.Actions = door, acts })
		c := h.child()
		c.setHandler(true)
		stepped := make(chan string, 1)
		go func() {
			p, err := h.sup.Step(context.Background(), "down")
			if err != nil {
				t.Error(err)
			}
			stepped <- p
		}()
		synctest.Wait()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v sent before the drain ended", got)
		}
		if st := h.sup.Status(); st.State != api.StateStepping {
			t.Errorf("state %q while draining, want stepping", st.State)
		}
		close(door.drain)
		if p := <-stepped; p != "asleep" {
			t.Fatalf("step reply %q, want asleep", p)
		}
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Fatalf("actions %v", got)
		}
		st := h.sup.Status()
		if st.State != api.StateAsleep || st.Profile != "asleep" || st.ChildPID != c.PID() {
			t.Fatalf("status %s %s pid %d, want asleep asleep %d", st.State, st.Profile, st.ChildPID, c.PID())
		}
		ev := h.rec.named(api.EventAction)
		if len(ev) != 1 || ev[0].Path != "/sleep?level=1&mode=wait" || ev[0].Profile != "asleep" || ev[0].Status == nil || *ev[0].Status != 200 {
			t.Fatalf("action events %+v", ev)
		}
		if s := h.rec.lastState(); s.Profile != "asleep" {
			t.Errorf("state file profile %q", s.Profile)
		}
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGUSR1}) {
			t.Errorf("child signals %v, want the notify signal only", sigs)
		}
		door.mu.Lock()
		launched := slices.Clone(door.launched)
		door.drain = make(chan struct{})
		close(door.drain)
		door.mu.Unlock()
		if len(launched) != 1 {
			t.Errorf("door reopened (%v) in a serving = false profile", launched)
		}

		stepTo(t, h, "up", "int8")
		if got := acts.got(); !slices.Equal(got[1:], []string{wakeCall}) {
			t.Fatalf("actions after the step up %v", got)
		}
		door.mu.Lock()
		launched = slices.Clone(door.launched)
		door.mu.Unlock()
		if !slices.Equal(launched, []int{1, 1}) {
			t.Errorf("door launches %v, want [1 1]: reopened for the same child", launched)
		}
		if st := h.sup.Status(); st.State != api.StateRunning || st.Profile != "int8" {
			t.Errorf("after the wake: %s %s", st.State, st.Profile)
		}
		h.noLaunch()
		c.end(Exit{})
		h.wait()
	})
}

// TestActionsLeaveOnlyIfEntered: a child started in the sleeping profile
// (not entered live) is not asked to wake on the step up.
func TestActionsLeaveOnlyIfEntered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acts := &fakeActions{}
		h := startHarness(t, sleepPolicy(), func(c *Config, d *Deps) { c.StartLevel = 2; d.Actions = acts })
		// Started asleep, no child runs (TestStartAsleep): the step up
		// starts one, and the leave of a sleep never entered is not run.
		stepTo(t, h, "up", "int8")
		c := h.child()
		if got := acts.got(); len(got) != 0 {
			t.Fatalf("actions %v for a profile never entered live", got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestActionsFailureFallsBack: a failed enter is journaled action_failed
// with its status, and the change falls back to a graceful restart into
// the new profile.
func TestActionsFailureFallsBack(t *testing.T) {
	for _, tt := range []struct {
		name   string
		status int
	}{{"404", 404}, {"refused", 0}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				pol := sleepPolicy()
				pol.Profiles[1].Enter = []policy.Action{{Method: "POST", Path: "/shrink", Timeout: time.Minute}}
				acts := &fakeActions{status: map[string]int{upstream + "/shrink": tt.status}}
				h := startHarness(t, pol, func(_ *Config, d *Deps) { d.Actions = acts })
				c := h.child()
				c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
					if sig == syscall.SIGTERM {
						c.end(Exit{})
					}
				})
				stepped := make(chan string, 1)
				go func() {
					p, _ := h.sup.Step(context.Background(), "down")
					stepped <- p
				}()
				c2 := h.child()
				if p := <-stepped; p != "int8" || c2.env("GPUGUARD_PROFILE") != "int8" {
					t.Fatalf("step reply %q, new child in %q, want int8", p, c2.env("GPUGUARD_PROFILE"))
				}
				ev := h.rec.named(api.EventActionFailed)
				if len(ev) != 1 || ev[0].Path != "/shrink" || ev[0].Profile != "int8" || ev[0].Error == "" {
					t.Fatalf("action_failed events %+v", ev)
				}
				if got := ev[0].Status; (tt.status == 0) != (got == nil) || got != nil && *got != tt.status {
					t.Errorf("status %v, want %d", got, tt.status)
				}
				c2.end(Exit{})
				h.wait()
			})
		})
	}
}

// TestStatusShowsAnActionsStepBeforeTheChild: a live change through
// server actions shows in status by the time the child is sent the
// notify signal.
func TestStatusShowsAnActionsStepBeforeTheChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, c, _, _ := startServing(t, sleepPolicy())
		seen := make(chan string, 4) // status's profile as the child is signalled
		c.setOnSignal(func(*fakeChild, syscall.Signal) { seen <- h.sup.Status().Profile })
		stepTo(t, h, "down", "asleep")
		if len(seen) != 1 {
			t.Fatalf("%d signals, want the step's one", len(seen))
		}
		if p := <-seen; p != "asleep" {
			t.Fatalf("status said profile %s as the child heard of the step to asleep", p)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestActionsWakeWithoutLeave: leaving a sleeping profile that has no
// leave (Ollama reloads by itself on the next request) still opens the
// door again.
func TestActionsWakeWithoutLeave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Profiles[2].Leave = nil
		h, c, door, _ := startServing(t, pol)
		stepTo(t, h, "down", "asleep")
		stepTo(t, h, "up", "int8")
		door.mu.Lock()
		launched := slices.Clone(door.launched)
		door.mu.Unlock()
		if !slices.Equal(launched, []int{1, 1}) {
			t.Errorf("door launches %v, want [1 1]: open again after the wake", launched)
		}
		if st := h.sup.Status(); st.State != api.StateRunning {
			t.Errorf("state %s after the wake, want running", st.State)
		}
		c.end(Exit{})
		h.wait()
	})
}
