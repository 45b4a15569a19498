package supervisor

import (
	"context"
	"errors"
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

// fakeReloader hands the supervisor the policy the test sets, or an error,
// and counts what the supervisor did with what it prepared.
type fakeReloader struct {
	mu      sync.Mutex
	next    *policy.Policy
	err     error
	seen    []*policy.Policy // cur, at each Load
	commits int
	aborts  int
}

func (f *fakeReloader) Load(cur *policy.Policy) (*Reload, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, cur)
	if f.err != nil {
		return nil, f.err
	}
	return &Reload{Policy: f.next, Command: f.next.Command, CheckpointPath: "/state/checkpoint",
		Commit: func() { f.mu.Lock(); f.commits++; f.mu.Unlock() },
		Abort:  func() { f.mu.Lock(); f.aborts++; f.mu.Unlock() }}, nil
}

func (f *fakeReloader) set(pol *policy.Policy, err error) {
	f.mu.Lock()
	f.next, f.err = pol, err
	f.mu.Unlock()
}

func (f *fakeReloader) counts() (commits, aborts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commits, f.aborts
}

// withReloader wires fr into the harness.
func withReloader(fr *fakeReloader, more ...func(*Config, *Deps)) func(*Config, *Deps) {
	return func(c *Config, d *Deps) {
		d.Reloader = fr
		for _, m := range more {
			m(c, d)
		}
	}
}

// reload runs Supervisor.Reload from the test's goroutine.
func (h *harness) reload() ([]string, error) {
	return h.sup.Reload(context.Background())
}

// reloadTo makes next the policy the reloader loads, reloads, and fails
// unless exactly the keys want changed.
func reloadTo(t *testing.T, h *harness, fr *fakeReloader, next *policy.Policy, want ...string) {
	t.Helper()
	fr.set(next, nil)
	if changed, err := h.reload(); err != nil || !slices.Equal(changed, want) {
		t.Fatalf("Reload = %q, %v; want %q changed", changed, err, want)
	}
}

// TestReloadThresholdsApplyAtOnce: lowering high below the current
// watermark steps down at the sample the reload asks for, without waiting
// for the next period; the reload event lists the changed keys in order.
func TestReloadThresholdsApplyAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		h := startHarness(t, livePolicy(), withReloader(fr))
		c := h.child()
		h.probe.setUsed(12 * gib) // 0.75: below high 0.90
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := h.sup.Status(); st.Level != 0 || st.Watermark != 0.75 {
			t.Fatalf("before the reload: %+v", st)
		}

		next := livePolicy()
		next.Watermark.High, next.Watermark.Low, next.Watermark.Sustain = 0.74, 0.5, 0
		t0 := time.Now()
		changed := []string{"watermark.high", "watermark.low", "watermark.sustain"}
		reloadTo(t, h, fr, next, changed...)
		synctest.Wait()
		if st := h.sup.Status(); st.Level != 1 || st.Profile != "int8" {
			t.Fatalf("after the reload: level %d %s, want the step down to int8", st.Level, st.Profile)
		}
		if d := time.Since(t0); d != 0 {
			t.Errorf("the step took %s: the reload must judge at once", d)
		}
		downs := h.rec.named(api.EventStepDown)
		if len(downs) != 1 || downs[0].Reason != api.ReasonWatermark {
			t.Fatalf("step-downs %+v", downs)
		}
		rel := h.rec.named(api.EventReload)
		if len(rel) != 1 || !slices.Equal(rel[0].Changed, changed) || rel[0].Profile != "fp16" || rel[0].Reason != "" {
			t.Fatalf("reload events %+v", rel)
		}
		if commits, aborts := fr.counts(); commits != 1 || aborts != 0 {
			t.Errorf("commits %d aborts %d, want 1 and 0", commits, aborts)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadKeepsSustainTimer: a reload does not restart the watermark
// timers: time already spent above high counts toward the new sustain
// (docs/operations.md, "What applies when").
func TestReloadKeepsSustainTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		h := startHarness(t, livePolicy(), withReloader(fr))
		c := h.child()
		sleep(time.Second)
		h.probe.setUsed(14*gib + gib/2) // 0.906: above high 0.90
		sleep(600 * time.Millisecond)   // above for 500..600ms of sustain's 1s
		if n := len(h.rec.named(api.EventStepDown)); n != 0 {
			t.Fatalf("%d step-downs before sustain", n)
		}

		next := livePolicy()
		next.Watermark.Sustain = 800 * time.Millisecond
		reloadTo(t, h, fr, next, "watermark.sustain")
		// 800ms above high is reached at most 300ms after the reload; a
		// timer restarted by the reload would need 800ms more.
		sleep(400 * time.Millisecond)
		if downs := h.rec.named(api.EventStepDown); len(downs) != 1 {
			t.Fatalf("step-downs %+v 400ms after the reload, want one: the time above high before it counts", downs)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadKeepsGraceStart: a grace period under way keeps its start
// across a reload that shortens it (docs/operations.md): the next step
// comes when the new grace, counted from the step, is over, not a whole
// new grace after the reload.
func TestReloadKeepsGraceStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		h := startHarness(t, livePolicy(), withReloader(fr))
		c := h.child()
		sleep(time.Second)
		h.probe.setUsed(14*gib + gib/2) // 0.906: above high 0.90, and it stays
		sleep(1200 * time.Millisecond)  // sustain's 1s and a sample
		downs := h.rec.named(api.EventStepDown)
		if len(downs) != 1 {
			t.Fatalf("step-downs %+v after sustain, want one", downs)
		}
		step := downs[0].Time
		sleep(time.Until(step.Add(time.Second))) // 1s into grace's 5s

		next := livePolicy()
		next.Watermark.Grace = 2 * time.Second
		reloadTo(t, h, fr, next, "watermark.grace")
		// Grace from the step ends at step+2s; one restarted by the reload
		// would end at step+3s.
		sleep(time.Until(step.Add(2500 * time.Millisecond)))
		if downs := h.rec.named(api.EventStepDown); len(downs) != 2 {
			t.Fatalf("step-downs %+v 2.5s after the first, want two: the grace period counts from the step", downs)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadNothingChanged: the same policy again is an applied reload
// with an empty (not absent) list, journaled; nothing moves.
func TestReloadNothingChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{next: testPolicy()}
		h := startHarness(t, testPolicy(), withReloader(fr))
		c := h.child()
		states := len(h.rec.states)
		changed, err := h.reload()
		if err != nil || changed == nil || len(changed) != 0 {
			t.Fatalf("Reload = %#v, %v; want an empty list", changed, err)
		}
		synctest.Wait()
		rel := h.rec.named(api.EventReload)
		if len(rel) != 1 || rel[0].Changed == nil || len(rel[0].Changed) != 0 {
			t.Fatalf("reload events %+v, want one with an empty list", rel)
		}
		if len(h.rec.states) != states || len(c.gotSignals()) != 0 {
			t.Error("a reload that changes nothing wrote the state file or signalled the child")
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadRefusedChangesNothing: a refused reload returns every problem,
// is journaled with reason error (so counted), and leaves the policy as
// it was: the next reload's Load sees the old one.
func TestReloadRefusedChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := testPolicy()
		fr := &fakeReloader{err: policy.ErrorList{
			{File: "p.toml", Line: 3, Key: "watermark.high", Msg: "must be below watermark.critical (0.97), got 0.99"},
			{File: "p.toml", Line: 9, Key: "priority", Msg: "must be between -1000 and 1000, got 5000"},
		}}
		h := startHarness(t, pol, withReloader(fr))
		c := h.child()
		_, err := h.reload()
		var re *ReloadError
		if !errors.As(err, &re) || len(re.Problems) != 2 {
			t.Fatalf("Reload error %v, want a ReloadError with both problems", err)
		}
		if re.Problems[0].Error() != "p.toml:3: watermark.high: must be below watermark.critical (0.97), got 0.99" {
			t.Errorf("first problem %q", re.Problems[0])
		}
		rel := h.rec.named(api.EventReload)
		if len(rel) != 1 || rel[0].Reason != api.ReasonError || rel[0].Changed != nil ||
			rel[0].Detail != re.Problems[0].Error()+"; "+re.Problems[1].Error() {
			t.Fatalf("reload events %+v", rel)
		}
		fr.set(testPolicy(), nil)
		if _, err := h.reload(); err != nil {
			t.Fatal(err)
		}
		if fr.seen[1] != pol {
			t.Error("after a refused reload the policy in force changed")
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadRefusedDetailBounded: a refused reload's error names the first
// problem and counts the rest; its event's detail lists at most the first
// maxProblemsJournaled problems and counts the rest (docs/operations.md).
func TestReloadRefusedDetailBounded(t *testing.T) {
	problem := func(i int) *policy.Error {
		return &policy.Error{File: "p.toml", Line: i, Key: "priority", Msg: fmt.Sprintf("problem %d", i)}
	}
	for _, tt := range []struct {
		n         int
		msgSuffix string // after the first problem
		detail    string // after the first problem
	}{
		{1, "", ""},
		{2, " (and 1 more problem)", "; p.toml:2: priority: problem 2"},
		{7, " (and 6 more problems)", "; p.toml:2: priority: problem 2; p.toml:3: priority: problem 3" +
			"; p.toml:4: priority: problem 4; p.toml:5: priority: problem 5; and 2 more"},
	} {
		synctest.Test(t, func(t *testing.T) {
			var list policy.ErrorList
			for i := 1; i <= tt.n; i++ {
				list = append(list, problem(i))
			}
			fr := &fakeReloader{err: list}
			h := startHarness(t, testPolicy(), withReloader(fr))
			c := h.child()
			_, err := h.reload()
			first := "p.toml:1: priority: problem 1"
			if want := "policy not reloaded (nothing changed): " + first + tt.msgSuffix; err == nil || err.Error() != want {
				t.Errorf("%d problems: error %v, want %q", tt.n, err, want)
			}
			rel := h.rec.named(api.EventReload)
			if len(rel) != 1 || rel[0].Detail != first+tt.detail {
				t.Errorf("%d problems: reload events %+v, want detail %q", tt.n, rel, first+tt.detail)
			}
			c.end(Exit{})
			h.wait()
		})
	}
}

// TestReloadProfileGone: a child whose profile the reload removed is
// stopped with stop_signal and restarted at the same position of the new
// ladder, or the best profile below it that fits, with
// GPUGUARD_LAST_EXIT=reload and a restart event of reason reload; it is not
// a crash.
func TestReloadProfileGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		h := startHarness(t, testPolicy(), withReloader(fr))
		c := h.child()
		c.setOnSignal(func(c *fakeChild, sig syscall.Signal) {
			if sig == syscall.SIGTERM {
				c.end(Exit{Code: -1, Signal: syscall.SIGTERM})
			}
		})
		h.probe.setUsed(9 * gib) // int8 needs 6: 15 > 14.4 does not fit; int4 does
		// A sample already under way read the usage before: let it land
		// first, or the restart may judge the fit on it (int8 would fit).
		synctest.Wait()
		next := testPolicy()
		next.Profiles = next.Profiles[1:] // fp16 is gone
		reloadTo(t, h, fr, next, "profile")
		c2 := h.child()
		if got := c.gotSignals(); !slices.Equal(got, []syscall.Signal{syscall.SIGTERM}) {
			t.Errorf("the old child got %v, want stop_signal once", got)
		}
		for k, want := range map[string]string{"GPUGUARD_LAST_EXIT": "reload", "GPUGUARD_PROFILE": "int4",
			"GPUGUARD_LEVEL": "1", "GPUGUARD_LEVELS": "2", "GPUGUARD_RESTARTS": "1"} {
			if got := c2.env(k); got != want {
				t.Errorf("restarted child: %s=%q, want %q", k, got, want)
			}
		}
		r := h.rec.named(api.EventRestart)
		if len(r) != 1 || r[0].Reason != api.ReasonReload || r[0].From != "fp16" || r[0].To != "int8" {
			t.Fatalf("restart events %+v, want one of reason reload from fp16 to int8 (the aim; int4 is what fit)", r)
		}
		if st := h.rec.lastState(); st.Profile != "int4" || st.Level != 1 || st.Reason != "restart after reload" {
			t.Errorf("state file %+v", st)
		}
		if len(h.rec.named(api.EventOOM)) != 0 || h.sup.Status().Restarts != 1 {
			t.Errorf("restarts %d", h.sup.Status().Restarts)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestReloadKeptProfileMoves: a running child whose profile is still in
// the ladder at another level keeps running; status and the state file
// show its new level (the state file is rewritten and published, the
// child is not signalled), and the next step goes from there.
func TestReloadKeptProfileMoves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		h := startHarness(t, testPolicy(), withReloader(fr))
		c := h.child()
		synctest.Wait()
		if _, err := h.sup.Step(context.Background(), "down"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		seq := h.rec.lastState().Seq
		signals := len(c.gotSignals()) // the live step's notification

		next := testPolicy()
		next.Profiles = append([]policy.Profile{{Name: "bf16", Needs: 12 * gib, Env: map[string]string{"MAX_BATCH": "48"}}}, next.Profiles...)
		fr.set(next, nil)
		if _, err := h.reload(); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if st := h.sup.Status(); st.Profile != "int8" || st.Level != 2 || st.Levels != 4 || st.ChildPID != c.pid {
			t.Fatalf("status %+v, want int8 at level 2 of 4, same child", st)
		}
		st := h.rec.lastState()
		if st.Profile != "int8" || st.Level != 2 || st.Seq != seq+1 {
			t.Fatalf("state file %+v, want int8 at level 2 with the next seq", st)
		}
		if p := h.rec.published[len(h.rec.published)-1]; p.Seq != st.Seq || p.Level != 2 {
			t.Errorf("published %+v", p)
		}
		if got := c.gotSignals(); len(got) != signals {
			t.Errorf("the child got %v; a reload that keeps its profile must not signal it", got)
		}
		if len(h.rec.named(api.EventRestart)) != 0 {
			t.Error("the reload restarted the child")
		}
		stepTo(t, h, "down", "int4")
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadCommandAtNextStart: a changed command leaves the running child
// alone and is what the next start runs.
func TestReloadCommandAtNextStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		h := startHarness(t, testPolicy(), withReloader(fr))
		c := h.child()
		next := testPolicy()
		next.Command = []string{"server2", "--b", "${MAX_BATCH}"}
		reloadTo(t, h, fr, next, "command")
		synctest.Wait()
		h.noLaunch()
		c.end(Exit{Code: 1}) // a crash: restarted after the backoff
		c2 := h.child()
		if want := []string{"server2", "--b", "32"}; !slices.Equal(c2.spec.Argv, want) {
			t.Errorf("next start ran %q, want %q", c2.spec.Argv, want)
		}
		c2.end(Exit{})
		h.wait()
	})
}

// TestReloadPriorityVisibleToPeers: a new priority is what the instance
// tells the other tenants at once: published to the coordinator and in the
// `tenant` answer.
func TestReloadPriorityVisibleToPeers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := &sharingtest.Coord{}
		fr := &fakeReloader{}
		h := startHarness(t, testPolicy(), withReloader(fr, withCoord(fc)))
		c := h.child()
		synctest.Wait()
		if p := fc.LastInfo().Priority; p != 0 {
			t.Fatalf("published priority %d before", p)
		}
		next := testPolicy()
		next.Priority = -40
		fr.set(next, nil)
		if _, err := h.reload(); err != nil {
			t.Fatal(err)
		}
		if p := fc.LastInfo().Priority; p != -40 {
			t.Errorf("published priority %d after the reload, want -40", p)
		}
		if p := h.sup.Admission().TenantInfo().Priority; p != -40 {
			t.Errorf("tenant answer priority %d, want -40", p)
		}
		if p := h.sup.Status().Priority; p != -40 {
			t.Errorf("status priority %d, want -40", p)
		}
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadProbeTimeoutFollowsInterval: the probe timeout derived from
// the interval (max(5 intervals, 2s)) follows a reloaded interval: with
// 1s, a call hung for 4s is not yet a failure (it was at 2s before).
func TestReloadProbeTimeoutFollowsInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{}
		fp := &flakyProbe{}
		h := startHarness(t, testPolicy(), withReloader(fr, func(c *Config, d *Deps) {
			fp.fakeProbe = d.Probe.(*fakeProbe)
			d.Probe = fp
		}))
		c := h.child()
		next := testPolicy()
		next.Watch.Interval, next.Watch.MaxInterval = time.Second, time.Second
		fr.set(next, nil)
		if _, err := h.reload(); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		hang := make(chan struct{})
		fp.set(nil, hang)
		sleep(4 * time.Second)
		if pe := h.rec.named(api.EventProbeError); len(pe) != 0 {
			t.Fatalf("a call hung for at most 4s failed: %+v", pe)
		}
		sleep(3 * time.Second)
		pe := h.rec.named(api.EventProbeError)
		if len(pe) != 1 || !strings.Contains(pe[0].Detail, "within 5s") {
			t.Fatalf("probe_error events %+v, want one after the 5s timeout", pe)
		}
		close(hang)
		c.end(Exit{})
		h.wait()
	})
}

// TestReloadAfterTheEnd: a reload the loop never takes is aborted.
func TestReloadAfterTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fr := &fakeReloader{next: testPolicy()}
		h := startHarness(t, testPolicy(), withReloader(fr))
		h.child().end(Exit{})
		h.wait()
		if _, err := h.reload(); err == nil {
			t.Fatal("a reload after the end succeeded")
		}
		if commits, aborts := fr.counts(); commits != 0 || aborts != 1 {
			t.Errorf("commits %d aborts %d, want 0 and 1", commits, aborts)
		}
	})
}
