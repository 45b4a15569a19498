package supervisor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/sharing/sharingtest"
	"github.com/gpuguard/gpuguard/policy"
)

// napPolicy is sleepPolicy with a last profile that stops the child:
// fp16, int8 (live), asleep (through actions), off.
func napPolicy() *policy.Policy {
	pol := sleepPolicy()
	pol.Profiles = append(pol.Profiles, policy.Profile{Name: "off", NotServing: true})
	return pol
}

// endOnTerm makes c end (status 0) at stop_signal, as a server does.
func endOnTerm(c *fakeChild) {
	c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
		if sig == syscall.SIGTERM {
			c.end(Exit{})
		}
	})
}

// rankLikeTenants is a coordinator's answer as the tenants rank: only a
// tenant whose child runs and serves (running, starting) can be chosen;
// this one alone, else nobody.
func rankLikeTenants(p api.Proposal, seq int64) api.Outcome {
	if p.Self.State != api.StateRunning && p.Self.State != api.StateStarting {
		return api.Outcome{Kind: api.OutcomeNoCandidate}
	}
	return sharingtest.SelfStep(p, seq)
}

// TestLiveActionThatFreesNothingLeadsOn: the server answers its release
// with 200 and frees nothing (SGLang without --enable-memory-saver), the
// GPU stays over high. `grace` after the actions, the relieved event says
// 0 B and the next step follows, down to stopping the server; not before
// grace. Alone, and on a shared GPU whose tenants never choose a sleeping
// instance.
func TestLiveActionThatFreesNothingLeadsOn(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "alone", true: "shared"}[shared], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				acts := &fakeActions{}
				mod := func(c *Config, d *Deps) { c.StartLevel = 1; d.Actions = acts }
				if shared {
					mod = withCoord(&sharingtest.Coord{DecideFunc: rankLikeTenants}, mod)
				}
				h := startHarness(t, napPolicy(), mod)
				c := h.child()
				c.setHandler(true)
				endOnTerm(c)
				h.probe.setUsed(15 * gib) // 0.94 > high 0.90, and the release changes nothing
				time.Sleep(1100 * time.Millisecond)
				synctest.Wait()
				if st := h.sup.Status(); st.State != api.StateAsleep || st.Profile != "asleep" {
					t.Fatalf("after the first step: %s %s, want asleep asleep", st.State, st.Profile)
				}
				released := h.rec.named(api.EventAction)[0].Time              // the actions end at once
				time.Sleep(time.Until(released.Add(4900 * time.Millisecond))) // within grace of the release
				synctest.Wait()
				if sigs := c.gotSignals(); slices.Contains(sigs, syscall.SIGTERM) {
					t.Fatalf("the server was stopped %s after the release, within grace", time.Since(released))
				}
				time.Sleep(200 * time.Millisecond)
				synctest.Wait()
				st := h.sup.Status()
				if st.State != api.StateAsleep || st.Profile != "off" || st.ChildPID != 0 {
					t.Fatalf("grace after the release: %s %s pid %d, want asleep off 0 (the server stopped)", st.State, st.Profile, st.ChildPID)
				}
				rel := h.rec.named(api.EventRelieved)
				if len(rel) != 1 || rel[0].RelievedBytes == nil || *rel[0].RelievedBytes != 0 || rel[0].From != "int8" || rel[0].To != "asleep" {
					t.Fatalf("relieved events %+v, want one of 0 bytes from int8 to asleep", rel)
				}
				downs := h.rec.named(api.EventStepDown)
				if len(downs) != 2 || downs[1].To != "off" || downs[1].Reason != api.ReasonWatermark || !strings.Contains(downs[1].Detail, "relieved 0 B") {
					t.Fatalf("stepdowns %+v", downs)
				}
				h.noLaunch()
				h.cancel()
				h.wait()
			})
		})
	}
}

// TestCriticalAfterLiveSleepStops: still at or above critical grace
// after a live sleep that freed nothing, the next step is by its
// non-live form: into a serving = false profile that is stopping the
// child, never a child started there.
func TestCriticalAfterLiveSleepStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, napPolicy(), func(c *Config, d *Deps) { c.StartLevel = 1; d.Actions = &fakeActions{} })
		c := h.child()
		c.setHandler(true)
		endOnTerm(c)
		h.probe.setUsed(15*gib + 800<<20) // 0.99 >= critical 0.97
		time.Sleep(7 * time.Second)
		synctest.Wait()
		st := h.sup.Status()
		if st.State != api.StateAsleep || st.Profile != "off" || st.ChildPID != 0 {
			t.Fatalf("%s %s pid %d, want asleep off 0", st.State, st.Profile, st.ChildPID)
		}
		if downs := h.rec.named(api.EventStepDown); len(downs) != 2 || downs[1].Reason != api.ReasonCritical {
			t.Fatalf("stepdowns %+v, want the second critical", downs)
		}
		h.noLaunch()
		h.cancel()
		h.wait()
	})
}

// TestHeldRequestDuringSleepStepWakes: a request held while a step into
// a serving = false profile is under way (the door drains) wakes the
// instance as soon as the step is done, at that very moment, not a sample
// (or hold) later: a live sleep is left through its actions, a stopped
// one starts the child again. Before the step is done nothing wakes.
func TestHeldRequestDuringSleepStepWakes(t *testing.T) {
	for _, tt := range []struct {
		name string
		pol  func() *policy.Policy
	}{{"live", sleepPolicy}, {"stopped", stopPolicy}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				door, acts := newFakeDoor(), &fakeActions{}
				pol := tt.pol()
				pol.Serve.Wake = true
				h := startHarness(t, pol, func(c *Config, d *Deps) { c.StartLevel = 1; d.Door, d.Actions = door, acts })
				c := h.child()
				c.setHandler(true)
				endOnTerm(c)
				var wg sync.WaitGroup
				wg.Go(func() {
					if _, err := h.sup.Step(context.Background(), "down"); err != nil {
						t.Errorf("step down: %v", err)
					}
				})
				synctest.Wait()
				if st := h.sup.Status(); st.State != api.StateStepping {
					t.Fatalf("state %s while draining, want stepping", st.State)
				}
				h.sup.Requested(true) // held at the drained door
				synctest.Wait()
				if got := acts.got(); len(got) != 0 || len(h.rec.named(api.EventStepUp)) != 0 {
					t.Fatalf("actions %v, stepups %v before the step into sleep is done", got, h.rec.named(api.EventStepUp))
				}
				asleepAt := time.Now()
				door.mu.Lock()
				close(door.drain)
				door.mu.Unlock()
				wg.Wait()
				synctest.Wait()
				if waited := time.Since(asleepAt); waited != 0 {
					t.Errorf("%s passed after the step into sleep was done, want none", waited)
				}
				ups := h.rec.named(api.EventStepUp)
				if len(ups) != 1 || ups[0].Reason != api.ReasonRequest || ups[0].To != "int8" {
					t.Fatalf("stepups %+v, want one to int8 for the request", ups)
				}
				c2 := c
				if tt.name == "stopped" {
					select {
					case c2 = <-h.launcher.launched:
					default:
						t.Fatal("no child started for the request once the child was stopped")
					}
					if got := c2.env("GPUGUARD_PROFILE"); got != "int8" {
						t.Fatalf("woken in %q, want int8", got)
					}
				}
				if tt.name == "live" {
					want := []string{sleepCall, wakeCall}
					if got := acts.got(); !slices.Equal(got, want) {
						t.Fatalf("actions %v, want %v", got, want)
					}
					if st := h.sup.Status(); st.State != api.StateRunning || st.Profile != "int8" || st.ChildPID != c.PID() {
						t.Fatalf("after the wake: %s %s pid %d", st.State, st.Profile, st.ChildPID)
					}
				}
				c2.end(Exit{})
				h.wait()
			})
		})
	}
}

// TestLaunchLinesNameTheirReason: every launch's stderr line, its fit
// event and its start event name the real reason: the first start, a
// crash, a manual step into a restart profile, a failed action's
// fallback (the step's reason), and a wake by request of a stopped
// sleep; the state file says the same.
func TestLaunchLinesNameTheirReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var lines []string
		pol := stopPolicy()
		pol.Serve.Wake = true
		pol.Serve.Upstream = upstream
		pol.Profiles[1].Enter = []policy.Action{{Method: "POST", Path: "/shrink", Timeout: time.Minute}}
		acts := &fakeActions{status: map[string]int{upstream + "/shrink": 500}}
		h := startHarness(t, pol, func(c *Config, d *Deps) {
			c.StartLevel = 1
			d.Actions = acts
			logf := d.Logf
			d.Logf = func(format string, args ...any) {
				mu.Lock()
				lines = append(lines, fmt.Sprintf(format, args...))
				mu.Unlock()
				logf(format, args...)
			}
		})
		stopOnTerm := func(c *fakeChild) *fakeChild {
			c.setHandler(true)
			endOnTerm(c)
			return c
		}
		c := stopOnTerm(h.child()) // the start, in int8
		c.end(Exit{Code: 1})       // a crash
		stopOnTerm(h.child())
		stepTo(t, h, "up", "fp16") // fp16 is not live: a restart
		stopOnTerm(h.child())
		stepTo(t, h, "down", "int8") // its enter fails: a restart
		stopOnTerm(h.child())
		stepTo(t, h, "down", "off")
		h.sup.Requested(true)
		c = h.child()
		synctest.Wait() // its fit is told once it runs
		want := []string{"start", "restart after crash", "restart after manual step", "restart after manual step", "restart after request"}
		var got []string
		mu.Lock()
		for _, l := range lines {
			if what, _, ok := strings.Cut(strings.TrimPrefix(l, "fit for the "), ": "); ok && strings.HasPrefix(l, "fit for the ") {
				got = append(got, what)
			}
		}
		mu.Unlock()
		if !slices.Equal(got, want) {
			t.Errorf("fit lines for %q, want %q", got, want)
		}
		var fits, starts []string
		for _, ev := range h.rec.named(api.EventFit) {
			fits = append(fits, ev.Reason)
		}
		for _, ev := range h.rec.named(api.EventStart) {
			starts = append(starts, ev.Reason)
		}
		reasons := []string{"start", "crash", "manual", "manual", "request"}
		if !slices.Equal(fits, reasons) || !slices.Equal(starts, reasons) {
			t.Errorf("fit events' reasons %q, start events' %q, want %q", fits, starts, reasons)
		}
		if st := h.rec.lastState(); st.Reason != "restart after request" {
			t.Errorf("state file reason %q", st.Reason)
		}
		c.end(Exit{})
		h.wait()
	})
}
