package supervisor

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// stopPolicy is testPolicy whose last profile serves nothing and has no
// actions: sleeping in it stops the child.
func stopPolicy() *policy.Policy {
	pol := testPolicy()
	pol.Profiles[2] = policy.Profile{Name: "off", NotServing: true, Env: map[string]string{"MAX_BATCH": "8"}}
	return pol
}

// TestSleepByStop: a step into a serving = false profile without actions
// stops the child and does not restart it (child_pid 0, state asleep);
// a step up starts it again in the profile above.
func TestSleepByStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, stopPolicy(), func(c *Config, _ *Deps) { c.StartLevel = 1 })
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
			if sig == syscall.SIGTERM {
				c.end(Exit{})
			}
		})
		stepTo(t, h, "down", "off")
		time.Sleep(time.Minute) // a minute of samples: nothing restarts it
		synctest.Wait()
		h.noLaunch()
		st := h.sup.Status()
		if st.State != api.StateAsleep || st.ChildPID != 0 || st.Profile != "off" {
			t.Fatalf("status %s pid %d %s, want asleep 0 off", st.State, st.ChildPID, st.Profile)
		}
		if s := h.rec.lastState(); s.Profile != "off" {
			t.Errorf("state file profile %q, want off", s.Profile)
		}
		stepped := make(chan string, 1)
		go func() {
			p, err := h.sup.Step(context.Background(), "up")
			if err != nil {
				t.Error(err)
			}
			stepped <- p
		}()
		c2 := h.child()
		if p := <-stepped; p != "int8" || c2.env("GPUGUARD_PROFILE") != "int8" {
			t.Fatalf("step up reply %q, child in %q, want int8", p, c2.env("GPUGUARD_PROFILE"))
		}
		if ups := h.rec.named(api.EventStepUp); len(ups) != 1 || ups[0].From != "off" || ups[0].To != "int8" {
			t.Errorf("stepup events %+v", ups)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestSleepNotLeftByRecovery: memory far below low for much longer than
// recover_after does not step up out of a serving = false profile.
func TestSleepNotLeftByRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := sleepPolicy()
		pol.Watermark.RecoverAfter = 2 * time.Second
		acts := &fakeActions{}
		h := startHarness(t, pol, func(c *Config, d *Deps) { c.StartLevel = 1; d.Actions = acts })
		c := h.child()
		c.setHandler(true)
		stepTo(t, h, "down", "asleep")
		h.probe.setUsed(0)
		time.Sleep(time.Minute)
		synctest.Wait()
		if st := h.sup.Status(); st.Profile != "asleep" || st.State != api.StateAsleep {
			t.Fatalf("after a minute below low: %s %s, want asleep asleep", st.Profile, st.State)
		}
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Errorf("actions %v: woken by recovery", got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestCrashWhileAsleep: a child that crashes while the instance sleeps
// live in a serving = false profile is not restarted there: the instance
// stays asleep with no child, and the next wake starts a child in the
// profile it wakes to, without the leave of a server that is gone.
func TestCrashWhileAsleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acts := &fakeActions{}
		h := startHarness(t, sleepPolicy(), func(c *Config, d *Deps) { c.StartLevel = 1; d.Actions = acts })
		c := h.child()
		stepTo(t, h, "down", "asleep")
		c.end(Exit{Code: 1})
		time.Sleep(time.Minute) // backoff and samples: nothing restarts it
		synctest.Wait()
		h.noLaunch()
		if st := h.sup.Status(); st.State != api.StateAsleep || st.ChildPID != 0 || st.Profile != "asleep" {
			t.Fatalf("status %s pid %d %s, want asleep 0 asleep", st.State, st.ChildPID, st.Profile)
		}
		stepTo(t, h, "up", "int8")
		c2 := h.child()
		if c2.env("GPUGUARD_PROFILE") != "int8" {
			t.Fatalf("woken child in %q, want int8", c2.env("GPUGUARD_PROFILE"))
		}
		if got := acts.got(); !slices.Equal(got, []string{sleepCall}) {
			t.Errorf("actions %v, want only the enter (no leave for a server that is gone)", got)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestStartAsleep: a start level that serves nothing starts no child:
// the instance is asleep until a step up starts one in the profile above.
func TestStartAsleep(t *testing.T) {
	for _, tt := range []struct {
		name string
		pol  func() *policy.Policy
	}{{"stopped", stopPolicy}, {"live", sleepPolicy}} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := startHarness(t, tt.pol(), func(c *Config, d *Deps) { c.StartLevel = 2; d.Actions = &fakeActions{} })
				time.Sleep(time.Minute)
				synctest.Wait()
				h.noLaunch()
				st := h.sup.Status()
				if st.State != api.StateAsleep || st.ChildPID != 0 || st.Profile != tt.pol().Profiles[2].Name {
					t.Fatalf("status %s pid %d %s, want asleep 0 in the start level", st.State, st.ChildPID, st.Profile)
				}
				if s := h.rec.lastState(); s.Profile != st.Profile {
					t.Errorf("state file profile %q, want %q", s.Profile, st.Profile)
				}
				stepped := make(chan string, 1)
				go func() {
					p, _ := h.sup.Step(context.Background(), "up")
					stepped <- p
				}()
				c := h.child()
				if p := <-stepped; p != "int8" || c.env("GPUGUARD_PROFILE") != "int8" {
					t.Fatalf("step up reply %q, child in %q, want int8", p, c.env("GPUGUARD_PROFILE"))
				}
				c.end(Exit{})
				h.wait()
			})
		})
	}
}

// TestReloadWakesStoppedSleep: an instance asleep with its child stopped,
// whose profile a reload makes serving (or removes, leaving a serving
// profile at its level), starts the child there: nothing else ever
// would. A reload that keeps the profile asleep starts nothing.
func TestReloadWakesStoppedSleep(t *testing.T) {
	for _, tt := range []struct {
		name  string
		next  func() *policy.Policy
		wants string // the profile the child starts in, "" for none
	}{
		{"still asleep", func() *policy.Policy {
			p := stopPolicy()
			p.Profiles[2].Env = map[string]string{"MAX_BATCH": "4"}
			return p
		}, ""},
		{"serves now", func() *policy.Policy { p := stopPolicy(); p.Profiles[2].NotServing = false; return p }, "off"},
		{"gone", func() *policy.Policy { p := stopPolicy(); p.Profiles = p.Profiles[:2]; return p }, "int8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fr := &fakeReloader{}
				h := startHarness(t, stopPolicy(), func(c *Config, d *Deps) { c.StartLevel = 2; d.Reloader = fr })
				synctest.Wait()
				h.noLaunch()
				changed := "profile"
				reloadTo(t, h, fr, tt.next(), changed)
				time.Sleep(time.Minute)
				synctest.Wait()
				if tt.wants == "" {
					h.noLaunch()
					if st := h.sup.Status(); st.State != api.StateAsleep {
						t.Fatalf("state %s, want asleep", st.State)
					}
					h.cancel()
					h.wait()
					return
				}
				c := h.child()
				if got := c.env("GPUGUARD_PROFILE"); got != tt.wants {
					t.Fatalf("child started in %q, want %q", got, tt.wants)
				}
				// The run began asleep: this is its first child.
				if st := h.rec.lastState(); st.Reason != "start after reload" {
					t.Errorf("state file reason %q, want start after reload", st.Reason)
				}
				c.end(Exit{})
				h.wait()
			})
		})
	}
}
