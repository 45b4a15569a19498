package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// Actions is the server actions' HTTP caller (package actions) as the
// supervisor sees it: it sends one request to the server's admin API and
// says how it went. Call blocks for up to c.Timeout, so the loop runs it
// from a goroutine of its own, never from the loop itself. A nil Actions
// is valid: every action then fails, and a change falls back to its
// restart.
type Actions interface {
	Call(ctx context.Context, c ActionCall) ActionResult
}

// ActionCall is one request: a profile's action with [serve] upstream
// prefixed and its content type decided.
type ActionCall struct {
	Method, URL, Body, ContentType string
	Headers                        map[string]string
	Timeout                        time.Duration
	Accept                         []int // statuses counted as success besides any 2xx
	// Until, when its URL is set, is polled with GET after the call
	// succeeded until the answer's status is in UntilStatus and its body
	// contains UntilBody, for up to UntilTimeout.
	UntilURL, UntilBody string
	UntilStatus         []int
	UntilTimeout        time.Duration
}

// ActionResult is how a call went: Err is nil exactly for a 2xx or an
// accepted status, with the until met; Status is 0 when no answer came
// back.
type ActionResult struct {
	Status int
	Err    error
	Took   time.Duration
}

// actionState is the loop's side of server actions.
type actionState struct {
	run *actionRun      // the live change with actions under way; nil when none
	out chan actionDone // its outcome, from the goroutine that runs it
	seq int             // runs begun, to tell a stale outcome
	// entered: the running profile was entered live with its enter done,
	// so its leave may run (a server is never asked to resume what it did
	// not release).
	entered bool
}

// actionRun is a live change from one profile to another through their
// actions: drain, the old profile's leave, the new one's enter.
type actionRun struct {
	seq         int
	to          string // the profile changed into, by name (a reload may renumber)
	reason, why string
	reply       chan response
	cancel      context.CancelFunc
	// sleeping: to serves nothing (a request held meanwhile wakes the
	// instance once the change is done); before: what the child held
	// before the change, measured as a sample's usage is (measure), known
	// when there was a reading.
	sleeping bool
	before   uint64
	known    bool
}

// actionStep is one call and the profile it belongs to, for the journal.
type actionStep struct {
	profile, path string
	call          ActionCall
}

// actionOutcome is one call's result.
type actionOutcome struct {
	actionStep
	res ActionResult
}

// actionDone is a run's outcome: the calls made, in order, the last one
// failed if any did (the calls after a failure are not made).
type actionDone struct {
	seq        int
	done       []actionOutcome
	drainTimed bool
}

// change begins the live change into to through the server actions steps
// (the running profile's leave, only if it was entered live, and the new
// profile's enter; none when leaving a serving = false profile that
// reloads by itself), once the front door (nil: none) has drained;
// changeProfile journaled the step and marks the instance stepping.
func (a *actionState) change(ctx context.Context, caller Actions, door Door, steps []actionStep, limit time.Duration,
	run *actionRun, runDone <-chan struct{}, logf func(string, ...any)) {
	var drain <-chan struct{}
	if door != nil {
		drain = door.Drain()
	}
	logf("live change to profile %s through %d server action(s) (%s)", run.to, len(steps), run.reason)
	a.begin(ctx, caller, steps, drain, limit, run, runDone)
}

// plan is the calls of a live change from one profile to another: from's
// leave (only if it was entered live) and to's enter.
func (a *actionState) plan(from, to policy.Profile, upstream string) []actionStep {
	var steps []actionStep
	if a.entered {
		steps = actionSteps(from, from.Leave, upstream)
	}
	return append(steps, actionSteps(to, to.Enter, upstream)...)
}

// begin runs the calls of run from a goroutine of its own (Call blocks),
// after drain (up to limit); the outcome comes back on out.
func (a *actionState) begin(ctx context.Context, caller Actions, steps []actionStep, drain <-chan struct{}, limit time.Duration,
	run *actionRun, runDone <-chan struct{}) {
	a.seq++
	ctx, run.cancel = context.WithCancel(ctx)
	run.seq = a.seq
	a.run = run
	if a.out == nil {
		a.out = make(chan actionDone, 1)
	}
	go runActions(ctx, caller, steps, drain, limit, a.seq, a.out, runDone)
}

// done takes the outcome d of the run under way, and returns that run;
// nil when d is stale (the child exited or gpuguard is stopping: the
// change was dropped).
func (a *actionState) done(d actionDone) *actionRun {
	run := a.run
	if run == nil || d.seq != run.seq {
		return nil
	}
	a.run = nil
	run.cancel()
	return run
}

// actionSteps turns a profile's actions into calls to upstream ([serve]).
func actionSteps(prof policy.Profile, acts []policy.Action, upstream string) []actionStep {
	steps := make([]actionStep, 0, len(acts))
	for _, a := range acts {
		call := ActionCall{
			Method: a.Method, URL: upstream + a.Path, Body: a.Body,
			ContentType: a.ContentType(), Headers: a.Headers, Timeout: a.Timeout, Accept: a.Accept,
		}
		if a.Until.Set() {
			call.UntilURL, call.UntilBody = upstream+a.Until.Path, a.Until.Body
			call.UntilStatus, call.UntilTimeout = a.Until.Status, a.Until.Timeout
		}
		steps = append(steps, actionStep{profile: prof.Name, path: a.Path, call: call})
	}
	return steps
}

// runActions waits for the drain (up to limit), then makes the calls in
// order until one fails, and sends the outcome to out (or gives up when
// the run ends first).
func runActions(ctx context.Context, caller Actions, steps []actionStep, drain <-chan struct{}, limit time.Duration,
	seq int, out chan<- actionDone, runDone <-chan struct{}) {
	d := actionDone{seq: seq}
	if drain != nil {
		t := time.NewTimer(limit)
		select {
		case <-drain:
		case <-t.C:
			d.drainTimed = true
		case <-ctx.Done():
		}
		t.Stop()
	}
	for _, s := range steps {
		var res ActionResult
		switch {
		case ctx.Err() != nil:
			res = ActionResult{Err: fmt.Errorf("not sent: %w", ctx.Err())}
		case caller == nil:
			res = ActionResult{Err: fmt.Errorf("no action caller")}
		default:
			res = caller.Call(ctx, s.call)
		}
		d.done = append(d.done, actionOutcome{actionStep: s, res: res})
		if res.Err != nil {
			break
		}
	}
	select {
	case out <- d:
	case <-runDone:
	}
}

// onActionsDone ends a live change with actions: it journals each call,
// then hands the outcome to the core (core.ActionsDone), which says
// whether the change is done (core.Entered: entered) or falls back to
// its non-live form (core.FallBack: a graceful restart, or stopping the
// child); a wake a request asked for meanwhile follows.
func (l *loop) onActionsDone(d actionDone) {
	run := l.life.acts.done(d)
	if run == nil {
		return // the child exited or gpuguard is stopping: the change was dropped
	}
	if d.drainTimed {
		l.deps.Logf("requests still in flight after stop_timeout (%s); running the actions anyway", l.pol.Restart.StopTimeout)
	}
	failed := false
	for _, o := range d.done {
		ev := api.Event{Event: api.EventAction, Path: o.path, Seconds: o.res.Took.Seconds()}
		if o.res.Status != 0 {
			ev.Status = new(o.res.Status)
		}
		if o.res.Err != nil {
			failed = true
			ev.Event, ev.Error = api.EventActionFailed, o.res.Err.Error()
			l.deps.Logf("server action %s %s of profile %s failed: %v", o.call.Method, o.path, o.profile, o.res.Err)
		}
		ev.Profile, ev.Level = o.profile, levelOf(l.pol, o.profile, l.life.level)
		l.out.Emit(ev)
	}
	if l.life.stop.stopping || l.life.run.child == nil {
		if run.reply != nil {
			run.reply <- response{err: errShutdown}
		}
		return
	}
	now := time.Now()
	level, ok := l.pol.ProfileIndex(run.to)
	l.feed(core.ActionsDone{Now: now, To: level, Reason: core.Reason(run.reason), Why: run.why,
		Failed: failed, Gone: !ok, Before: run.before, Known: run.known}, run.reply)
	l.wakeIfWanted(now)
}

// entered finishes a live change with actions into level (why): the
// state file, the notify signal, the publication, the door open again
// unless the profile serves nothing; reply (if any) gets the profile.
func (l *loop) entered(level int, why string, reply chan response) {
	l.life.level = level
	prof := l.pol.Profiles[level]
	l.life.acts.entered = len(prof.Enter) > 0
	l.life.state = api.StateRunning
	if !prof.Serving() {
		l.life.state = api.StateAsleep
	}
	st, err := l.life.file.writeAt(l.pol.Profiles[l.life.level], l.life.level, why)
	if err != nil {
		l.deps.Logf("%v", err)
	}
	l.publishSnapshot() // status shows the change before the child hears of it, and before the reply
	l.life.run.notify(l.pol.Notify.Signal, st, &l.out)
	l.out.publish(st)
	if prof.Serving() {
		l.s.act.woke(time.Now())
	}
	if prof.Serving() && l.deps.Door != nil {
		l.deps.Door.Launched(l.life.hist.starts) // open again at the next healthy answer
	}
	l.deps.Logf("now in profile %s (%s)", prof.Name, why)
	if reply != nil {
		reply <- response{profile: prof.Name}
	}
}

// wakeIfWanted gives a wake that a held request asked for while a step
// into a serving = false profile was under way its chance as soon as that
// step is done (core.Wake), not a sample later.
func (l *loop) wakeIfWanted(now time.Time) {
	if l.core.Waking() && !l.life.end.finished {
		l.feed(l.wakeFacts(now, false, time.Time{}), nil)
	}
}

// levelOf is the level of the named profile in pol, or else running.
func levelOf(pol *policy.Policy, name string, running int) int {
	if i, ok := pol.ProfileIndex(name); ok {
		return i
	}
	return running
}

// exited drops a run under way when the child exits (its exit is handled
// as any other): no profile of the new child was entered live.
func (a *actionState) exited() {
	a.entered = false
	run := a.run
	if run == nil {
		return
	}
	a.run = nil
	run.cancel()
	if run.reply != nil {
		run.reply <- response{err: fmt.Errorf("the child exited during the change to profile %s", run.to)}
	}
}

// acting reports a live change with actions under way: no other step
// begins until it ends.
func (a *actionState) acting() bool { return a.run != nil }
