package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// livePolicy is testPolicy with every profile live.
func livePolicy() *policy.Policy {
	pol := testPolicy()
	for i := range pol.Profiles {
		pol.Profiles[i].Live = true
	}
	return pol
}

func step(t *testing.T, h *harness, direction string) string {
	t.Helper()
	p, err := h.sup.Step(context.Background(), direction)
	if err != nil {
		t.Fatalf("step %s: %v", direction, err)
	}
	return p
}

// stepTo steps h's instance in direction and fails unless it lands in
// profile want.
func stepTo(t *testing.T, h *harness, direction, want string) {
	t.Helper()
	if p := step(t, h, direction); p != want {
		t.Fatalf("step %s = %q, want %q", direction, p, want)
	}
}

// TestNotifySkippedUntilHandler: a child with no handler for the notify
// signal is not sent it; the state file and the socket event still carry
// the change, and the skip is journaled. Once its handler is in, it gets
// the signal, exactly once per change, between the state file and the
// event.
func TestNotifySkippedUntilHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, livePolicy(), func(c *Config, d *Deps) { d.Launcher.(*fakeLauncher).noHandler = true })
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { h.rec.op("signal") })
		stepTo(t, h, "down", "int8")
		if sigs := c.gotSignals(); len(sigs) != 0 {
			t.Fatalf("a child without a handler got %v", sigs)
		}
		if st := h.rec.lastState(); st.Level != 1 || st.Seq != 2 {
			t.Fatalf("state file %+v, want level 1 seq 2", st)
		}
		skipped := h.rec.named(api.EventNotifySkipped)
		if len(skipped) != 1 || skipped[0].PID != c.pid || skipped[0].Profile != "int8" ||
			!strings.Contains(skipped[0].Detail, "SIGUSR1 not sent") || !strings.Contains(skipped[0].Detail, "no handler") {
			t.Fatalf("notify_skipped events %+v", skipped)
		}
		c.setHandler(true)
		step(t, h, "down")
		step(t, h, "up")
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR1}) {
			t.Fatalf("child got %v, want SIGUSR1 once for each of two changes", sigs)
		}
		if n := len(h.rec.named(api.EventNotifySkipped)); n != 1 {
			t.Fatalf("%d notify_skipped events, want still 1", n)
		}
		// start: state, publish; skipped change: state, publish; then two
		// changes in the contract's order.
		want := []string{"state", "publish", "state", "publish", "state", "signal", "publish", "state", "signal", "publish"}
		if got := h.rec.gotOps(); !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
		synctest.Wait() // the new child's first sample (kicked at its launch) is in
		if st := h.sup.Status(); st.State != api.StateRunning || st.ChildPID != c.pid || len(h.rec.named(api.EventStart)) != 1 {
			t.Fatalf("the child must keep running: %+v", st)
		}
		h.signals <- syscall.SIGTERM
		synctest.Wait()
		c.end(Exit{})
		h.wait()
	})
}

// TestNotifySkippedWhenMasksUnreadable: when it cannot be told whether the
// child catches the signal, it is not sent (a notification must never kill
// the child); the skip says why.
func TestNotifySkippedWhenMasksUnreadable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, livePolicy(), nil)
		c := h.child()
		c.mu.Lock()
		c.maskErr = fmt.Errorf("reading the signal dispositions of pid %d: %w", c.pid, os.ErrNotExist)
		c.mu.Unlock()
		step(t, h, "down")
		if sigs := c.gotSignals(); len(sigs) != 0 {
			t.Fatalf("child got %v", sigs)
		}
		skipped := h.rec.named(api.EventNotifySkipped)
		if len(skipped) != 1 || !strings.Contains(skipped[0].Detail, "unknown") || !strings.Contains(skipped[0].Detail, "does not exist") {
			t.Fatalf("notify_skipped events %+v", skipped)
		}
		c.end(Exit{})
		h.wait()
	})
}

// plainLauncher launches children that cannot tell their signal masks.
type plainLauncher struct{ *fakeLauncher }

type plainChild struct{ Child }

func (l plainLauncher) Launch(spec LaunchSpec) (Child, error) {
	c, err := l.fakeLauncher.Launch(spec)
	if err != nil {
		return nil, err
	}
	return plainChild{c}, nil
}

// TestNotifySentToChildThatCannotTell: a Child without Catches is
// always signalled: whether it has a handler cannot be told.
func TestNotifySentToChildThatCannotTell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, livePolicy(), func(c *Config, d *Deps) {
			l := d.Launcher.(*fakeLauncher)
			l.noHandler = true // not asked
			d.Launcher = plainLauncher{l}
		})
		c := h.child()
		step(t, h, "down")
		if sigs := c.gotSignals(); !slices.Equal(sigs, []syscall.Signal{syscall.SIGUSR1}) {
			t.Fatalf("child got %v, want one SIGUSR1", sigs)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestDiedOfNotifySignalRestartsInNewProfile: a child that dies of the
// notify signal right after a live change (its handler went away between
// the check and the signal) is restarted at once in the new profile with
// LAST_EXIT=watermark, journaled as a watermark restart, never as a
// crash, and outside the crash budget: more of them than max_restarts
// never give up.
func TestDiedOfNotifySignalRestartsInNewProfile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := livePolicy()
		pol.Restart.MaxRestarts = 2
		h := startHarness(t, pol, nil)
		c := h.child()
		want := []string{"int8", "int4", "int8", "fp16", "int8"}
		for i, profile := range want {
			c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
				if sig == syscall.SIGUSR1 {
					c.end(Exit{Code: -1, Signal: syscall.SIGUSR1})
				}
			})
			dir := "down"
			if i == 2 || i == 3 {
				dir = "up"
			}
			t0 := time.Now()
			step(t, h, dir)
			c = h.child()
			if waited := time.Since(t0); waited >= pol.Restart.Backoff {
				t.Errorf("restart %d after %s: no backoff is due", i+1, waited)
			}
			if got := []string{c.env("GPUGUARD_PROFILE"), c.env("GPUGUARD_LAST_EXIT"), c.env("GPUGUARD_RESTARTS")}; !slices.Equal(got, []string{profile, "watermark", fmt.Sprint(i + 1)}) {
				t.Fatalf("restart %d: profile, last exit, restarts = %v, want %s watermark %d", i+1, got, profile, i+1)
			}
		}
		r := h.rec.named(api.EventRestart)
		if len(r) != len(want) {
			t.Fatalf("%d restart events, want %d", len(r), len(want))
		}
		for _, ev := range r {
			if ev.Reason != api.ReasonWatermark || ev.From != ev.To || !strings.Contains(ev.Detail, "notify signal") || *ev.Status != 128+int(syscall.SIGUSR1) {
				t.Fatalf("restart event %+v", ev)
			}
		}
		if n := len(h.rec.named(api.EventGiveUp)); n != 0 {
			t.Fatal("gave up: deaths by the notify signal were counted against max_restarts")
		}
		c.end(Exit{})
		if code, _ := h.wait(); code != 0 {
			t.Fatalf("code %d", code)
		}
	})
}

// TestDeathBySignalIsACrashUnlessNotified: death by the notify signal with
// no notification sent to this child (skipped, or long ago) is a crash.
func TestDeathBySignalIsACrashUnlessNotified(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, h *harness, c *fakeChild)
	}{
		{"never notified", func(t *testing.T, h *harness, c *fakeChild) {}},
		{"skipped", func(t *testing.T, h *harness, c *fakeChild) {
			c.setHandler(false)
			step(t, h, "down")
		}},
		{"notified outside the window", func(t *testing.T, h *harness, c *fakeChild) {
			step(t, h, "down")
			time.Sleep(core.NotifyDeathWindow + time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := startHarness(t, livePolicy(), nil)
				c := h.child()
				tc.setup(t, h, c)
				c.end(Exit{Code: -1, Signal: syscall.SIGUSR1})
				c2 := h.child()
				if got := c2.env("GPUGUARD_LAST_EXIT"); got != "crash" {
					t.Fatalf("LAST_EXIT=%s, want crash", got)
				}
				if r := h.rec.named(api.EventRestart); len(r) != 1 || r[0].Reason != api.ReasonCrash {
					t.Fatalf("restart events %+v", r)
				}
				c2.end(Exit{})
				h.wait()
			})
		})
	}
}

// TestCommandThatCannotRun: a command the launcher says cannot run ends the
// run with the launcher's error, returned once and not logged as well,
// before anything is written for the start (no state file, no start
// event). A Launch that fails ends it the same way.
func TestCommandThatCannotRun(t *testing.T) {
	errNotFound := errors.New(`cannot run "server": command not found in PATH=/bin`)
	for _, tc := range []struct {
		name       string
		check      bool // the Check fails, else Launch
		wantStates int
	}{
		{"check", true, 0},
		{"launch", false, 1}, // the state file precedes the exec
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var logs []string
				h := startHarness(t, testPolicy(), func(c *Config, d *Deps) {
					l := d.Launcher.(*fakeLauncher)
					if tc.check {
						l.badCommand = errNotFound
					} else {
						l.fail = errNotFound
					}
					d.Logf = func(format string, args ...any) {
						mu.Lock()
						logs = append(logs, fmt.Sprintf(format, args...))
						mu.Unlock()
					}
				})
				code, err := h.wait()
				if code != 1 || !errors.Is(err, errNotFound) || err.Error() != errNotFound.Error() {
					t.Fatalf("got %d %q, want 1 and the launcher's error as is", code, err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, l := range logs {
					if strings.Contains(l, "cannot run") {
						t.Errorf("logged %q as well as returned it", l)
					}
				}
				if n := len(h.rec.states); n != tc.wantStates {
					t.Errorf("%d state file writes, want %d", n, tc.wantStates)
				}
				if n := len(h.rec.named(api.EventStart)); n != 0 {
					t.Errorf("%d start events", n)
				}
				if g := h.rec.named(api.EventGiveUp); len(g) != 1 || g[0].Detail != errNotFound.Error() {
					t.Errorf("giveup events %+v", g)
				}
			})
		})
	}
}

// TestCommandThatCannotRunOnRestart: a command that disappears while its
// child runs ends the run at the restart, before the checkpoint rotation.
func TestCommandThatCannotRunOnRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startHarness(t, testPolicy(), nil)
		c := h.child()
		h.launcher.mu.Lock()
		h.launcher.badCommand = errors.New("gone")
		h.launcher.mu.Unlock()
		c.end(Exit{Code: 1})
		if code, err := h.wait(); code != 1 || err == nil || err.Error() != "gone" {
			t.Fatalf("got %d %v", code, err)
		}
		if h.rec.rotations != 0 {
			t.Fatalf("%d rotations for a start that could not happen", h.rec.rotations)
		}
	})
}
