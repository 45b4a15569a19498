package core

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// napLadder is fp16, int8 (live), nap (serving = false through an
// action), off (serving = false, the child stopped).
func napLadder(p *policy.Policy) {
	p.Serve.Wake = true
	p.Profiles[2] = policy.Profile{Name: "nap", NotServing: true, Live: true, Enter: []policy.Action{{Path: "/release"}}}
	p.Profiles = append(p.Profiles, policy.Profile{Name: "off", NotServing: true})
}

// TestActionsDoneDecisions: the end of a live change through server
// actions, one row per edge: done, it is entered and (down the ladder)
// measured `grace` after; what relieved nothing and left the watermark
// above high leads to the next step (by its non-live form at or above
// critical, the alarm at the last profile); a coordinated instance leaves
// a serving profile's next step to the tenants but takes a sleeping
// one's; observe mode only says so; another step or a new child since
// ends the measurement unmade; a change up is not measured; a failed
// change, or one whose profile a reload removed, falls back to the
// profile's non-live form.
func TestActionsDoneDecisions(t *testing.T) {
	done := func(to int) ActionsDone {
		return ActionsDone{Now: at(0), To: to, Reason: Watermark, Before: 4 * gib, Known: true}
	}
	measured := func(d time.Duration, ratio float64, used uint64) Measured {
		return Measured{Now: at(d), Ratio: ratio, Used: used}
	}
	shared := func(m Measured) Measured { m.Shared = true; return m }
	roomy := &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: 4 * gib, Total: 16 * gib}}, ProcessesAt: t0}
	for _, tc := range []row{
		{"a change that relieved nothing leads to the next step, after grace", napLadder, false, []in{
			{1, done(2), "entered 2"},
			{2, measured(4*time.Second, 0.94, 4*gib), ""},
			{2, measured(5*time.Second, 0.94, 4*gib), "journal relieved; log; step stepdown to 3 (watermark)"},
			{3, measured(6*time.Second, 0.94, 4*gib), ""},
		}},
		{"a change that relieved enough is journaled, and nothing follows", napLadder, false, []in{
			{1, done(2), "entered 2"},
			{2, measured(5*time.Second, 0.80, 256*mib), "journal relieved"},
			{2, measured(6*time.Second, 0.94, 256*mib), ""},
		}},
		{"at or above critical, the next step is by its non-live form", napLadder, false, []in{
			{1, done(2), "entered 2"},
			{2, measured(5*time.Second, 0.98, 4*gib), "journal relieved; log; restart stepdown to 3 (critical)"},
		}},
		{"at the last profile: the critical alarm, or nothing below critical", napLadder, false, []in{
			{2, done(3), "entered 3"},
			{3, measured(5*time.Second, 0.94, 4*gib), "journal relieved"},
			{2, done(3), "entered 3"},
			{3, measured(10*time.Second, 0.98, 4*gib), "journal relieved; journal critical; log"},
		}},
		{"coordinated: a serving profile's next step is the tenants', a sleeping one's its own", napLadder, false, []in{
			{0, done(1), "entered 1"},
			{1, shared(measured(5*time.Second, 0.94, 4*gib)), "journal relieved"},
			{1, done(2), "entered 2"},
			{2, shared(measured(5*time.Second, 0.94, 4*gib)), "journal relieved; log; step stepdown to 3 (watermark)"},
		}},
		{"observe mode only says what would follow", napLadder, true, []in{
			{1, done(2), "entered 2"},
			{2, measured(5*time.Second, 0.94, 4*gib), "journal relieved; log"},
		}},
		{"a wake since ends the measurement, taken or not", napLadder, false, []in{
			{1, done(2), "entered 2"},
			{2, Wake{Now: at(time.Second), Request: true, Live: true, Reading: roomy, Tree: map[int]bool{}}, "step stepup to 1 (request)"},
			{2, Woke{Now: at(time.Second)}, ""},
			{2, measured(5*time.Second, 0.94, 4*gib), ""},
		}},
		{"a new child since ends the measurement", napLadder, false, []in{
			{1, done(2), "entered 2"},
			{2, Launched{Now: at(time.Second)}, ""},
			{2, measured(5*time.Second, 0.94, 4*gib), ""},
		}},
		{"a change up is not measured", napLadder, false, []in{
			{2, done(1), "entered 1"},
			{1, measured(5*time.Second, 0.94, 4*gib), ""},
		}},
		{"a failed change falls back: a restart into a serving profile, a stop into one that serves nothing", napLadder, false, []in{
			{0, ActionsDone{Now: at(0), To: 1, Reason: Manual, Failed: true}, "log; fall back to 1 (manual)"},
			{1, ActionsDone{Now: at(0), To: 2, Reason: IdleSleep, Failed: true}, "fall back to 2 (idle) asleep"},
			{2, measured(5*time.Second, 0.94, 4*gib), ""},
		}},
		{"a profile a reload removed falls back to the level in force", napLadder, false, []in{
			{1, ActionsDone{Now: at(0), To: -1, Reason: Watermark, Gone: true}, "log; fall back to 1 (watermark)"},
			{3, ActionsDone{Now: at(0), To: -1, Reason: Watermark, Gone: true}, "fall back to 3 (watermark) asleep"},
		}},
	} {
		tc.play(t)
	}
}

// TestRelievedEvent: the relieved event and the next step's detail say
// what the change freed, 0 B included; without a reading before the
// change the amount is unknown and the event carries none.
func TestRelievedEvent(t *testing.T) {
	pol := testPolicy()
	napLadder(pol)
	// relieve is a live change from int8 to nap, before bytes held before
	// it (known: there was a reading), measured at ratio with used held.
	relieve := func(before uint64, known bool, ratio float64, used uint64) []Effect {
		st, _ := Decide(State{}, Given{Policy: pol, Level: 1}, ActionsDone{Now: t0, To: 2, Before: before, Known: known})
		_, effs := Decide(st, Given{Policy: pol, Level: 2}, Measured{Now: at(5 * time.Second), Ratio: ratio, Used: used})
		return effs
	}
	effs := relieve(4*gib, true, 0.94, 5*gib)
	ev := effs[0].(Journal).Event
	if ev.Event != api.EventRelieved || ev.RelievedBytes == nil || *ev.RelievedBytes != 0 || ev.From != "int8" || ev.To != "nap" ||
		ev.Detail != "the live change to nap relieved 0 B within grace 5s; watermark 0.94" {
		t.Errorf("relieved event %+v", ev)
	}
	if s := effs[2].(Step); s.Why != "watermark 0.94 > 0.90 5s after the live change to nap, which relieved 0 B" {
		t.Errorf("the next step's why %q", s.Why)
	}
	if ev := relieve(4*gib, true, 0.5, gib)[0].(Journal).Event; ev.RelievedBytes == nil || *ev.RelievedBytes != 3*gib {
		t.Errorf("relieved %+v, want 3 GiB", ev)
	}
	if ev := relieve(0, false, 0.5, gib)[0].(Journal).Event; ev.RelievedBytes != nil || !strings.Contains(ev.Detail, "relieved an unknown amount") {
		t.Errorf("relieved without a reading before: %+v", ev)
	}
}

// TestWakeAfterSleepStep: a request held while a step into a serving =
// false profile is under way keeps its wish through that step (the
// samples during it too), and wakes the instance once the step is done,
// stopped or live. Without the step under way a request in a serving
// profile asks nothing; without [serve] wake, nothing wakes.
func TestWakeAfterSleepStep(t *testing.T) {
	roomy := &Reading{Devices: []Device{{Index: 0, UUID: "a", Used: 4 * gib, Total: 16 * gib}}, ProcessesAt: t0}
	live := Wake{Now: t0, Live: true, Reading: roomy, Tree: map[int]bool{}}
	for _, tc := range []row{
		{"into a stopped sleep: the wake follows the stop", napLadder, false, []in{
			{1, Wake{Request: true, Sleeping: true}, ""},
			{1, Wake{Sleeping: true}, ""},
			{3, Wake{Stopped: true}, "wake stopped to 1 (request)"},
			{3, Wake{Stopped: true}, ""},
		}},
		{"into a live sleep: the wake follows the actions", napLadder, false, []in{
			{1, Wake{Request: true, Sleeping: true}, ""},
			{2, live, "step stepup to 1 (request)"},
		}},
		{"no step under way: a request in a serving profile asks nothing", napLadder, false, []in{
			{1, Wake{Request: true}, ""},
			{3, Wake{Stopped: true}, ""},
		}},
		{"without [serve] wake nothing wakes", func(p *policy.Policy) { napLadder(p); p.Serve.Wake = false }, false, []in{
			{1, Wake{Request: true, Sleeping: true}, ""},
			{3, Wake{Stopped: true}, ""},
		}},
	} {
		tc.play(t)
	}
}

// TestLaunchReasons: every launch carries its real reason from the
// decision to the line: the first start, the exit restarted after (oom,
// crash, gpu_fault), the step a restart gpuguard began was for (the
// plan's: manual, critical, request, ...), the notify signal's death; the
// backoff's end and the start keep it.
func TestLaunchReasons(t *testing.T) {
	pol := testPolicy()
	pol.Restart.OnGPUFault = policy.OnGPUFaultRestart
	g := Given{Policy: pol}
	why := func(effs []Effect) Reason {
		for _, e := range effs {
			switch e := e.(type) {
			case Relaunch:
				return e.Why
			case Requested:
				return e.Why
			case Launch:
				return e.Why
			case Wait:
				return e.Why
			case NoteFit:
				return e.Why
			}
		}
		return "none"
	}
	for _, tc := range []struct {
		name string
		in   Input
		want Reason
	}{
		{"the first start", Begin{}, FirstStart},
		{"a crash", Exited{Now: t0, Exit: Exit{Code: 1}, Ran: time.Second}, "crash"},
		{"an OOM", Exited{Now: t0, Exit: Exit{Code: 42}, Ran: time.Second}, "oom"},
		{"a GPU fault", Exited{Now: t0, Exit: Exit{Code: 1}, Ran: time.Second, Fault: &Fault{}}, "gpu_fault"},
		{"a restart gpuguard began for a manual step", Exited{Now: t0, Exit: Exit{}, Plan: &Plan{Level: 1, Reason: Manual}}, Manual},
		{"a failed action's fallback for a request", Exited{Now: t0, Exit: Exit{}, Plan: &Plan{Level: 1, Reason: RequestWake}}, RequestWake},
		{"the notify signal's death", Exited{Now: t0.Add(time.Second), Exit: Exit{Code: -1, Signal: syscall.SIGUSR1},
			Notified: t0, NotifySig: syscall.SIGUSR1}, NotifyDeath},
		{"the backoff's end keeps it", BackoffOver{Target: 1, Why: "crash"}, "crash"},
		{"the start keeps it", Start{Devices: []Device{{Total: 16 * gib}}, Why: Critical}, Critical},
		{"a start unchecked keeps it", Start{Err: errors.New("no reading"), Why: Manual}, Manual},
		{"a wait keeps it", Start{Devices: []Device{{Used: 15 * gib, Total: 16 * gib}}, Why: RequestWake}, RequestWake},
	} {
		if _, effs := Decide(State{}, g, tc.in); why(effs) != tc.want {
			t.Errorf("%s: %s, want %s (%s)", tc.name, why(effs), tc.want, briefs(effs))
		}
	}
}
