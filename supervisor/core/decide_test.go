package core

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// brief is an effect as a table row spells it.
func brief(e Effect) string {
	switch e := e.(type) {
	case Step:
		s := fmt.Sprintf("step %s to %d (%s)", e.Event, e.To, e.Reason)
		if e.Restart {
			s = fmt.Sprintf("restart %s to %d (%s)", e.Event, e.To, e.Reason)
		}
		if e.Manual {
			s += " manual"
		}
		if e.For != "" {
			s += " for " + e.For
		}
		return s
	case AskRoom:
		return fmt.Sprintf("ask room on %s for %.1f GiB", e.GPU, float64(e.Shortfall)/(1<<30))
	case Journal:
		return "journal " + e.Event.Event
	case Log:
		return "log"
	case Reply:
		if e.Err == nil {
			return "reply ok"
		}
		return "reply: " + e.Err.Error()
	case NoteFit:
		return "fit: " + e.Outcome
	case Launch:
		return fmt.Sprintf("launch %d", e.Level)
	case Wait:
		return "wait"
	case Finish:
		return fmt.Sprintf("finish %s %d/%d", e.State, e.End, e.Status)
	case Restart:
		return fmt.Sprintf("count %s to %d", e.Kind, e.To)
	case Relaunch:
		return fmt.Sprintf("relaunch %d after %s", e.Level, e.Delay)
	case BeginStop:
		return fmt.Sprintf("begin stop %d takeover=%v", e.Sig, e.TakeOver)
	case AnnounceStop:
		return "announce stop"
	case StopChild:
		return fmt.Sprintf("stop child %d", e.Sig)
	case Kill:
		return "kill"
	case Requested:
		return fmt.Sprintf("requested %s from %s to %d", e.Kind, e.From, e.Level)
	case FellAsleep:
		return "fell asleep"
	case StayAsleep:
		return "stay asleep: " + e.Why
	case SampleNow:
		return "sample now"
	case Released:
		return "released"
	case WakeStopped:
		s := fmt.Sprintf("wake stopped to %d (%s)", e.To, e.Reason)
		if e.Manual {
			s += " manual"
		}
		return s
	case Propose:
		return fmt.Sprintf("propose %s", e.Reason)
	case ClaimStart:
		return fmt.Sprintf("claim %v", e.GPUs)
	case EndStart:
		if e.Log != "" {
			return "end start: " + e.Log
		}
		return "end start"
	case Entered:
		return fmt.Sprintf("entered %d", e.To)
	case FallBack:
		if e.Sleep {
			return fmt.Sprintf("fall back to %d (%s) asleep", e.To, e.Reason)
		}
		return fmt.Sprintf("fall back to %d (%s)", e.To, e.Reason)
	}
	return fmt.Sprintf("%T", e)
}

func briefs(effs []Effect) string {
	s := make([]string, len(effs))
	for i, e := range effs {
		s[i] = brief(e)
	}
	return strings.Join(s, "; ")
}

// TestDecide: every policy edge of the core is one row: a run of inputs,
// each at a level, and the effects each one asks for. The rows cover
// sustain, grace, critical (once after grace, and at the last profile
// once per grace), predicted before high, recover_after, a step not
// taken, serving = false, observe mode, max_restarts in the window,
// backoff growth, OOM one lower, when_full wait/lowest/exit, a ladder
// that never fits, and the manual step at either end, while not running
// and when it does not fit, stops (once, a second kills, with no child,
// over a lost GPU's), stop_timeout and the backoff's end, and how an
// exit is explained: during a stop (a lost GPU's ends 1), a sleep, a
// restart gpuguard asked for, asleep in a serving = false profile, the
// notify signal's death (within its window), a GPU fault (stop, restart,
// max_restarts) and on_gpu_lost = "stop".
func TestDecide(t *testing.T) {
	smp := func(d time.Duration, ratio float64) Input { return Sample{Now: at(d), Ratio: ratio} }
	exit := func(d time.Duration, e Exit, ran time.Duration) Input { return Exited{Now: at(d), Exit: e, Ran: ran} }
	free := func(used uint64) []Device { return []Device{{Index: 0, UUID: "a", Used: used, Total: 16 * gib}} }
	crash := Exit{Code: 1}
	sleepy := func(p *policy.Policy) {
		p.Serve.Idle = time.Minute
		p.Profiles[2].NotServing = true
	}
	for _, tc := range []row{
		{"sustain: a step after sustain above high, not before", nil, false, []in{
			{0, smp(0, 0.93), ""},
			{0, smp(999*time.Millisecond, 0.93), ""},
			{0, smp(time.Second, 0.93), "step stepdown to 1 (watermark)"},
		}},
		{"grace: no second step within grace", nil, false, []in{
			{0, smp(0, 0.93), ""},
			{0, smp(time.Second, 0.93), "step stepdown to 1 (watermark)"},
			{1, smp(3*time.Second, 0.93), ""},
			{1, smp(5*time.Second+999*time.Millisecond, 0.96), ""},
		}},
		{"critical once after grace: a restart one lower", nil, false, []in{
			{0, smp(0, 0.98), ""},
			{0, smp(time.Second, 0.98), "step stepdown to 1 (watermark)"},
			{1, smp(6*time.Second, 0.98), "restart stepdown to 2 (critical)"},
			{2, smp(7*time.Second, 0.98), ""},
		}},
		{"critical at the last profile: journaled once per grace", nil, false, []in{
			{2, smp(0, 0.99), ""},
			{2, smp(time.Second, 0.99), "journal critical; log"},
			{2, smp(2*time.Second, 0.99), ""},
			{2, smp(6*time.Second, 0.99), "journal critical; log"},
		}},
		{"predicted before high", nil, false, []in{
			{0, Sample{Now: at(0), Ratio: 0.80, Predicted: true, Ran: time.Minute, ETA: 3}, ""},
			{0, Sample{Now: at(time.Second), Ratio: 0.85, Predicted: true, Ran: time.Minute, ETA: 2}, "step stepdown to 1 (predicted)"},
		}},
		{"no predicted step before the child has run for grace: its start-up is not a leak", nil, false, []in{
			{0, Sample{Now: at(0), Ratio: 0.80, Predicted: true, Ran: 3 * time.Second}, ""},
			{0, Sample{Now: at(time.Second), Ratio: 0.85, Predicted: true, Ran: 4 * time.Second}, ""},
			{0, Sample{Now: at(2 * time.Second), Ratio: 0.85, Predicted: true, Ran: 5 * time.Second}, ""},
			{0, Sample{Now: at(3 * time.Second), Ratio: 0.85, Predicted: true, Ran: 6 * time.Second}, "step stepdown to 1 (predicted)"},
		}},
		{"recover_after: a step up", func(p *policy.Policy) { p.Watermark.RecoverAfter = 5 * time.Second }, false, []in{
			{1, smp(0, 0.5), ""},
			{1, smp(4*time.Second, 0.5), ""},
			{1, smp(5*time.Second, 0.5), "step stepup to 0 (recovered)"},
		}},
		{"no recovery out of a serving = false profile", func(p *policy.Policy) {
			p.Watermark.RecoverAfter = time.Second
			p.Profiles[1].NotServing = true
		}, false, []in{
			{1, smp(0, 0.1), ""},
			{1, smp(2*time.Second, 0.1), ""},
		}},
		{"a step not taken is tried again at the next sample", nil, false, []in{
			{0, smp(0, 0.93), ""},
			{0, smp(time.Second, 0.93), "step stepdown to 1 (watermark)"},
			{0, NotTaken{}, ""},
			{0, smp(1100*time.Millisecond, 0.93), "step stepdown to 1 (watermark)"},
		}},
		{"a gap restarts sustain", nil, false, []in{
			{0, smp(0, 0.93), ""},
			{0, Gap{}, ""},
			{0, smp(time.Second, 0.93), ""},
			{0, smp(2*time.Second, 0.93), "step stepdown to 1 (watermark)"},
		}},
		{"a new child starts the rules afresh", nil, false, []in{
			{0, smp(0, 0.93), ""},
			{0, Launched{}, ""},
			{0, smp(time.Second, 0.93), ""},
		}},
		{"observe mode journals a would-be step and takes none", func(p *policy.Policy) { p.Watermark.RecoverAfter = time.Second }, true, []in{
			{0, smp(0, 0.93), ""},
			{0, smp(time.Second, 0.93), "journal observe; log"},
			{0, smp(2*time.Second, 0.93), ""}, // grace, as after a step
			{1, smp(7*time.Second, 0.1), ""},
			{1, smp(8*time.Second, 0.1), "log"}, // a would-be step up is only logged
		}},
		{"observe mode: another tenant's step holds", nil, true, []in{
			{0, smp(0, 0.93), ""},
			{0, Sample{Now: at(time.Second), Ratio: 0.93, PeerHeld: true}, ""},
		}},
		{"a peer's verdict steps this instance", nil, false, []in{
			{0, Peer{Now: at(0), Reason: Watermark, Why: "shared", Ratio: 0.93}, "step stepdown to 1 (watermark)"},
			{1, Peer{Now: at(time.Second), Reason: Critical, Ratio: 0.99}, "restart stepdown to 2 (critical)"},
			{2, Peer{Now: at(2 * time.Second), Reason: Watermark, Ratio: 0.99}, "journal critical; log"},
			{2, Peer{Now: at(3 * time.Second), Reason: Watermark, Ratio: 0.99}, ""},
			{0, Peer{Now: at(4 * time.Second), Reason: Recovered}, ""},
		}},
		{"a clean exit ends the run with 0", nil, false, []in{
			{0, exit(0, Exit{}, time.Second), "finish exited 0/0"},
		}},
		{"an OOM restarts one profile lower, at the last in the last", nil, false, []in{
			{0, exit(0, Exit{Code: 42}, time.Second), "journal oom; count oom to 1; log; relaunch 1 after 1s"},
			{2, exit(time.Second, Exit{Code: 42}, time.Second), "journal oom; count oom to 2; log; relaunch 2 after 2s"},
		}},
		{"a crash without on_crash ends with its status", func(p *policy.Policy) { p.Restart.OnCrash = false }, false, []in{
			{0, exit(0, Exit{Code: 3}, time.Second), "finish exited 1/3"},
		}},
		{"backoff grows per failure to its cap and resets after reset_after", nil, false, []in{
			{1, exit(0, crash, time.Second), "count crash to 1; log; relaunch 1 after 1s"},
			{1, exit(time.Second, crash, time.Second), "count crash to 1; log; relaunch 1 after 2s"},
			{1, exit(2*time.Second, crash, time.Second), "count crash to 1; log; relaunch 1 after 4s"},
			{1, exit(3*time.Second, crash, time.Second), "count crash to 1; log; relaunch 1 after 4s"},
			{1, exit(4*time.Second, crash, 2*time.Minute), "count crash to 1; log; relaunch 1 after 1s"},
		}},
		{"max_restarts in the window gives up; after the window it restarts", func(p *policy.Policy) { p.Restart.MaxRestarts = 2 }, false, []in{
			{0, exit(0, crash, time.Second), "count crash to 0; log; relaunch 0 after 1s"},
			{0, exit(time.Second, crash, time.Second), "count crash to 0; log; relaunch 0 after 2s"},
			{0, exit(2*time.Second, crash, time.Second), "journal giveup; log; finish fatal 1/1"},
			{0, exit(time.Hour, crash, time.Second), "count crash to 0; log; relaunch 0 after 4s"},
		}},
		{"an exit during a stop ends with the child's status; a lost GPU's with 1", nil, false, []in{
			{0, Exited{Now: at(0), Exit: Exit{Code: 0}, Stopping: true, Plan: &Plan{Level: 1}}, "finish exited 1/0"},
			{0, Exited{Now: at(0), Exit: Exit{Code: 3}, Stopping: true}, "finish exited 1/3"},
			{0, Exited{Now: at(0), Exit: Exit{Code: 0}, Stopping: true, Lost: errors.New("lost")}, "finish fatal 3/0"},
		}},
		{"an exit of a child stopped to sleep: asleep, not restarted", nil, false, []in{
			{0, Exited{Now: at(0), Exit: crash, Plan: &Plan{Level: 2, Sleep: true}}, "fell asleep"},
		}},
		{"an exit gpuguard asked for restarts at once, outside the budget", func(p *policy.Policy) { p.Restart.MaxRestarts = 0 }, false, []in{
			{0, Exited{Now: at(0), Exit: crash, Plan: &Plan{Level: 1, From: "fp16"}}, "requested watermark from fp16 to 1"},
			{1, Exited{Now: at(0), Exit: Exit{}, Plan: &Plan{Level: 1, From: "gone", Reload: true}}, "requested reload from gone to 1"},
		}},
		{"the notify signal's death restarts in place, outside the budget; outside its window it is a crash", nil, false, []in{
			{1, Exited{Now: at(time.Second), Exit: Exit{Code: -1, Signal: syscall.SIGHUP}, Notified: at(0), NotifySig: syscall.SIGHUP},
				"log; requested watermark from int8 to 1"},
			{1, Exited{Now: at(NotifyDeathWindow + time.Second), Exit: Exit{Code: -1, Signal: syscall.SIGHUP}, Notified: at(0), NotifySig: syscall.SIGHUP},
				"count crash to 1; log; relaunch 1 after 1s"},
			{1, Exited{Now: at(time.Second), Exit: Exit{Code: -1, Signal: syscall.SIGTERM}, Notified: at(0), NotifySig: syscall.SIGHUP},
				"count crash to 1; log; relaunch 1 after 2s"},
		}},
		{"a child that ends on its own asleep stays down; one that ends the run ends it", func(p *policy.Policy) { p.Profiles[1].NotServing = true }, false, []in{
			{1, exit(0, crash, time.Second), "log; stay asleep: asleep in profile int8: the child ended (crash)"},
			{1, exit(0, Exit{Code: 42}, time.Second), "log; stay asleep: asleep in profile int8: the child ended (oom)"},
			{1, Exited{Now: at(0), Exit: Exit{Code: -1, Signal: syscall.SIGHUP}, Notified: at(0), NotifySig: syscall.SIGHUP},
				"log; stay asleep: asleep in profile int8: the child ended (crash)"},
			{1, exit(0, Exit{}, time.Second), "finish exited 0/0"},
		}},
		{"a crash without on_crash asleep ends the run", func(p *policy.Policy) {
			p.Profiles[1].NotServing = true
			p.Restart.OnCrash = false
		}, false, []in{
			{1, exit(0, crash, time.Second), "finish exited 1/1"},
		}},
		{"a GPU fault's exit with on_gpu_fault = stop gives up", func(p *policy.Policy) {
			p.Restart.MaxRestarts = 1
		}, false, []in{
			{1, Exited{Now: at(0), Exit: Exit{}, Ran: time.Second, Fault: &Fault{Index: 0, UUID: "a", Meaning: "m"}}, "journal giveup; finish fatal 3/0"},
		}},
		{"a GPU fault's exit with on_gpu_fault = restart", func(p *policy.Policy) {
			p.Restart.MaxRestarts = 1
			p.Restart.OnGPUFault = policy.OnGPUFaultRestart
		}, false, []in{
			{1, Exited{Now: at(0), Exit: Exit{}, Ran: time.Second, Fault: &Fault{Index: 0, UUID: "a", Meaning: "m"}}, "count gpu_fault to 1; log; relaunch 1 after 1s"},
			{1, Exited{Now: at(time.Second), Exit: Exit{}, Ran: time.Second, Fault: &Fault{Index: 0, UUID: "a", Meaning: "m"}}, "journal giveup; finish fatal 3/0"},
		}},
		{"a lost GPU stops the child as gpuguard's stops do, or ends at once with none", nil, false, []in{
			{0, Lost{Err: errors.New("lost"), Running: true}, "journal giveup; log; begin stop 15 takeover=false; announce stop; stop child 15"},
			{0, Lost{Err: errors.New("lost"), Running: true, Restarting: true}, "journal giveup; log; begin stop 15 takeover=false; announce stop"},
			{0, Lost{Err: errors.New("lost")}, "journal giveup; finish fatal 3/0"},
		}},
		{"a start takes the first profile from the target that fits", nil, false, []in{
			{0, Start{Devices: free(0), Target: 0}, "launch 0"},
			{0, Start{Devices: free(6 * gib), Target: 0}, "launch 1"},
			{0, Start{Devices: free(0), Target: 1}, "launch 1"},
		}},
		{"when_full = wait waits", func(p *policy.Policy) { p.Profiles[2].Needs = 4 * gib }, false, []in{
			{0, Start{Devices: free(13 * gib), Target: 0}, "wait"},
		}},
		{"when_full = lowest starts in the last profile", func(p *policy.Policy) {
			p.Profiles[2].Needs = 4 * gib
			p.Restart.WhenFull = policy.WhenFullLowest
		}, false, []in{
			{0, Start{Devices: free(13 * gib), Target: 0}, "launch 2"},
		}},
		{"when_full = exit exits 75", func(p *policy.Policy) {
			p.Profiles[2].Needs = 4 * gib
			p.Restart.WhenFull = policy.WhenFullExit
		}, false, []in{
			{0, Start{Devices: free(13 * gib), Target: 0}, "fit: no profile fits; exiting (when_full = \"exit\"); finish fatal 2/0"},
		}},
		{"a ladder that never fits exits 75 whatever when_full says", func(p *policy.Policy) {
			for i := range p.Profiles {
				p.Profiles[i].Needs = 20 * gib
			}
		}, false, []in{
			{0, Start{Devices: free(0), Target: 0}, "fit: no profile can ever fit; finish fatal 2/0"},
		}},
		{"a ladder that can fit goes on to the start, and waits", func(p *policy.Policy) { p.Profiles[2].Needs = 4 * gib }, false, []in{
			{0, Start{Devices: free(15 * gib), Target: 0}, "wait"},
		}},
		{"manual steps: at either end, while not running, when it does not fit", nil, false, []in{
			{0, ManualStep{Now: at(0), Up: true, Running: true}, "reply: already at the first profile fp16"},
			{2, ManualStep{Now: at(0), Running: true}, "reply: already at the last profile int4"},
			{0, ManualStep{Now: at(0), Running: false, State: api.StateWaiting}, "reply: instance is waiting; try again once it runs"},
			{0, ManualStep{Now: at(0), Running: true, Reading: &Reading{Devices: free(14 * gib), ProcessesAt: at(0)}},
				"reply: profile int8 does not fit: it needs 6 GiB, and GPU 0 has 409.6 MiB free under high 0.90 (14 GiB of 16 GiB used without this child)"},
			// Without a process list the current profile's estimate (fp16's
			// 10 GiB) is taken to be the child's own.
			{0, ManualStep{Now: at(0), Running: true, Reading: &Reading{Devices: free(14 * gib)}}, "step stepdown to 1 (manual) manual"},
			{0, ManualStep{Now: at(0), Running: true}, "step stepdown to 1 (manual) manual"},
			{1, ManualStep{Now: at(0), Up: true, Running: true}, "step stepup to 0 (manual) manual"},
		}},
		{"a stop is forwarded once; a second kills", nil, false, []in{
			{0, StopSignal{Sig: syscall.SIGTERM, Running: true}, "begin stop 15 takeover=false; log; journal stop; announce stop; stop child 15"},
			{0, StopSignal{Sig: syscall.SIGINT, Running: true, Stopping: true}, "log; kill"},
		}},
		{"a stop with no child ends the run as the signal would", nil, false, []in{
			{0, StopSignal{Sig: syscall.SIGINT}, "journal stop; finish exited 4/2"},
		}},
		{"SIGURG is the runtime's, never a stop", nil, false, []in{
			{0, StopSignal{Sig: syscall.SIGURG, Running: true}, ""},
		}},
		{"an operator's stop takes over the stop for a lost GPU", nil, false, []in{
			{0, StopSignal{Sig: syscall.SIGTERM, Running: true, Stopping: true, Lost: true}, "begin stop 15 takeover=true; journal stop; stop child 15"},
			{0, StopSignal{Sig: syscall.SIGINT, Running: true, Stopping: true, Lost: true, Signalled: syscall.SIGTERM}, "begin stop 2 takeover=true; journal stop; stop child 2"},
			{0, StopSignal{Sig: syscall.SIGTERM, Running: true, Stopping: true, Lost: true, Signalled: syscall.SIGTERM}, "begin stop 15 takeover=true; journal stop"},
		}},
		{"a stop during a step's restart: the signal the child already has is not sent twice; another is forwarded", nil, false, []in{
			{0, StopSignal{Sig: syscall.SIGTERM, Running: true, Signalled: syscall.SIGTERM}, "begin stop 15 takeover=false; log; journal stop; announce stop"},
			{0, StopSignal{Sig: syscall.SIGINT, Running: true, Signalled: syscall.SIGTERM}, "begin stop 2 takeover=false; log; journal stop; announce stop; stop child 2"},
			{0, StopSignal{Sig: syscall.SIGTERM, Running: true, Stopping: true, Signalled: syscall.SIGTERM}, "log; kill"},
		}},
		{"stop_timeout kills the child's group", nil, false, []in{
			{0, StopWaitOver{Running: true}, "log; kill"},
			{0, StopWaitOver{}, "log"},
		}},
		{"the backoff's end starts the next child", nil, false, []in{
			{0, BackoffOver{Target: 2}, "relaunch 2 after 0s"},
		}},
		{"idle: to the first serving = false profile after [serve] idle since ready, once per grace", sleepy, false, []in{
			{0, IdleCheck{Now: at(59 * time.Second), Since: at(0), Ready: true}, ""},
			{0, IdleCheck{Now: at(time.Minute), Since: at(0), Ready: false}, ""},
			{0, IdleCheck{Now: at(time.Minute), Since: at(0), Ready: true}, "step stepdown to 2 (idle)"},
			{0, NotTaken{}, ""}, // not undone: the grace holds the next watermark step
			{0, smp(time.Minute, 0.93), ""},
			{0, smp(time.Minute+time.Second, 0.93), ""},
		}},
		{"idle: never while a request is in flight or held, however long since the last answer", sleepy, false, []in{
			{0, IdleCheck{Now: at(time.Hour), Since: at(0), Ready: true, Busy: true}, ""},
			{0, IdleCheck{Now: at(time.Hour + time.Second), Since: at(time.Hour), Ready: true}, ""},
		}},
		{"idle: never out of a serving = false profile", sleepy, false, []in{
			{2, IdleCheck{Now: at(time.Hour), Since: at(0), Ready: true}, ""},
		}},
		{"idle: off without [serve] idle or a serving = false profile", nil, false, []in{
			{0, IdleCheck{Now: at(time.Hour), Since: at(0), Ready: true}, ""},
		}},
		{"idle: off without [serve] idle, a serving = false profile or not", func(p *policy.Policy) { p.Profiles[2].NotServing = true }, false, []in{
			{0, IdleCheck{Now: at(time.Hour), Since: at(0), Ready: true}, ""},
		}},
		{"idle: off without a serving = false profile to sleep in", func(p *policy.Policy) { p.Serve.Idle = time.Minute }, false, []in{
			{0, IdleCheck{Now: at(time.Hour), Since: at(0), Ready: true}, ""},
		}},
		{"nobody can step lower: the critical alarm once per grace", nil, false, []in{
			{0, PeerNobody{Now: at(0), Ratio: 0.93, GPU: "a", Shared: true}, ""},
			{0, PeerNobody{Now: at(time.Second), Ratio: 0.98, GPU: "a", Shared: true}, "journal critical; log"},
			{0, PeerNobody{Now: at(2 * time.Second), Ratio: 0.98, GPU: "a", Shared: true}, ""},
			{0, PeerNobody{Now: at(7 * time.Second), Ratio: 0.99, GPU: "a"}, "journal critical; log"},
		}},
	} {
		tc.play(t)
	}
}

// in is one input of a row, given at level, and the effects it must ask
// for (briefs).
type in struct {
	level int
	in    Input
	want  string
}

// row is one row of a decision table: a run of inputs from a fresh
// state, under testPolicy edited by pol, observe mode or not.
type row struct {
	name string
	pol  func(*policy.Policy)
	obs  bool
	ins  []in
}

func (tc row) play(t *testing.T) {
	t.Helper()
	t.Run(tc.name, func(t *testing.T) {
		pol := testPolicy()
		if tc.pol != nil {
			tc.pol(pol)
		}
		st := State{}
		for i, x := range tc.ins {
			var effs []Effect
			st, effs = Decide(st, Given{Policy: pol, Level: x.level, Observe: tc.obs}, x.in)
			if got := briefs(effs); got != x.want {
				t.Fatalf("input %d (%T at level %d):\n got %q\nwant %q", i, x.in, x.level, got, x.want)
			}
		}
	})
}

// TestDecideTexts: the details and errors the effects carry, which the
// journal, the log and the exit status show.
func TestDecideTexts(t *testing.T) {
	pol := testPolicy()
	pol.Profiles[2].Needs = 4 * gib
	pol.Restart.WhenFull = policy.WhenFullExit
	g := Given{Policy: pol}
	_, effs := Decide(State{}, g, Start{Devices: []Device{{Index: 0, Used: 13 * gib, Total: 16 * gib}}})
	f := effs[1].(Finish)
	if !errors.Is(f.Err, ErrNoFit) || !strings.Contains(f.Err.Error(), "GPU 0: 13 GiB used of 16 GiB") {
		t.Errorf("when_full = exit: %v", f.Err)
	}
	pol.Watermark.Sustain = 0
	_, effs = Decide(State{}, g, Sample{Now: time.Unix(0, 0), Ratio: 0.95})
	if s := effs[0].(Step); s.Why != "watermark 0.95 > 0.90" {
		t.Errorf("a watermark step's why: %q", s.Why)
	}
	_, effs = Decide(State{}, g, Exited{Now: time.Unix(0, 0), Exit: Exit{Code: 1, Stderr: []byte("x\nCUDA out of memory\n")}, Ran: time.Second})
	j := effs[0].(Journal)
	if j.Event.Event != api.EventOOM || j.Event.Detail == "" || len(j.Event.Stderr) != 2 {
		t.Errorf("the oom event: %+v", j.Event)
	}
	if r := effs[1].(Restart); r.Kind != ExitOOM || r.Status != 1 || r.Evidence != j.Event.Detail {
		t.Errorf("the restart: %+v", r)
	}
}

// TestReasonVocabulary: one reason per step, and the wire words of the
// shared-GPU messages map to it and back.
func TestReasonVocabulary(t *testing.T) {
	for _, tc := range []struct {
		v      Verdict
		reason Reason
		kind   string
	}{
		{StepDown, Watermark, api.KindDown},
		{StepDownPredicted, Predicted, api.KindPredicted},
		{RestartLower, Critical, api.KindCritical},
		{StepUp, Recovered, api.KindUp},
		{Hold, "", ""},
		{CriticalAtLast, "", ""},
	} {
		if got := tc.v.Reason(); got != tc.reason {
			t.Errorf("%s: reason %q, want %q", tc.v, got, tc.reason)
		}
		if got := tc.reason.Kind(); got != tc.kind {
			t.Errorf("%s: kind %q, want %q", tc.reason, got, tc.kind)
		}
		if tc.kind != "" && ReasonOfKind(tc.kind) != tc.reason {
			t.Errorf("kind %q: reason %q, want %q", tc.kind, ReasonOfKind(tc.kind), tc.reason)
		}
	}
	if string(Watermark) != api.ReasonWatermark || string(Critical) != api.ReasonCritical || string(Recovered) != api.ReasonRecovered ||
		string(Predicted) != api.ReasonPredicted || string(Manual) != api.ReasonManual {
		t.Error("the reasons are the journal's and the metrics' strings")
	}
}

// TestHowToChange: the way of every change of profile, by the profile
// stepped into (live, serving, with enter actions) and the one left.
func TestHowToChange(t *testing.T) {
	enter := []policy.Action{{Path: "/sleep"}}
	for _, tc := range []struct {
		name  string
		from  policy.Profile
		to    policy.Profile
		calls int
		want  How
	}{
		{"live, no actions: in place", policy.Profile{}, policy.Profile{Live: true}, 0, ByLive},
		{"live with actions: through them", policy.Profile{}, policy.Profile{Live: true}, 1, ByActions},
		{"live out of a serving = false profile: through the actions' path, with none to make", policy.Profile{NotServing: true, Live: true}, policy.Profile{Live: true}, 0, ByActions},
		{"not live: a restart", policy.Profile{}, policy.Profile{}, 0, ByRestart},
		{"not live, whatever actions: a restart", policy.Profile{}, policy.Profile{}, 2, ByRestart},
		{"serving = false, not live: sleep by stopping", policy.Profile{}, policy.Profile{NotServing: true}, 0, BySleep},
		{"serving = false, live without enter: sleep by stopping", policy.Profile{}, policy.Profile{NotServing: true, Live: true}, 0, BySleep},
		{"serving = false, live with enter: through the actions", policy.Profile{}, policy.Profile{NotServing: true, Live: true, Enter: enter}, 1, ByActions},
	} {
		pol := &policy.Policy{Profiles: []policy.Profile{tc.from, tc.to}}
		if got := HowToChange(pol, 0, 1, tc.calls); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
