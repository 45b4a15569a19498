package supervisor

import (
	"syscall"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
)

// lifecycle is the child's lifecycle: the instance's state, the level it
// runs in, the children so far, the one that runs, a restart or a sleep
// gpuguard asked for, a live change through server actions, a stop under
// way, the wait before the next start, how Run ends, and the two things
// in front of the child: the state file it reads its profile from and the
// front door. Each part is a type of its own. What it needs of the rest
// it is given once: the loop's voice (out), the pacer's sampleNow (a wait
// takes a sample at once), the loop's snapshot (a status asked after a
// reply shows what the reply says) and the service manager.
type lifecycle struct {
	state string
	level int          // the profile the child runs in, or the next start aims at
	plan  *restartPlan // a restart or a sleep gpuguard asked for is under way, until the next start
	hist  history      // the children so far (child.go)
	run   childRun     // the child that runs now (child.go)
	acts  actionState  // a live change through server actions (actions.go)
	stop  stopRun      // a stop under way
	wait  startWait    // the wait before the next start
	end   ending       // how Run ends
	file  stateFile    // the state file (statewrite.go)
	door  doorLink     // the front door (door.go)
	// roomFor is the peer the last step down was taken for (reason
	// room; "" for any other): the instance sleeps for it (room.go).
	roomFor string

	out       *reporter // the loop's voice
	sampleNow func()    // the pacer's: the next sample is due now
	snapshot  func()    // the loop's publishSnapshot
	notifier  Notifier  // nil: no service manager
}

// The predicates the loop asks of the lifecycle, spelled once.

// running reports whether a child runs that gpuguard is not stopping or
// restarting.
func (c *lifecycle) running() bool {
	return c.run.child != nil && !c.stop.stopping && c.plan == nil
}

// steady reports whether a child runs with nothing else under way: no
// stop, no restart or sleep gpuguard asked for, no live change through
// server actions. Only then do the watermark rules, a manual step, a step
// the tenants decide and a live wake apply.
func (c *lifecycle) steady() bool { return c.running() && !c.acts.acting() }

// serving reports whether the child is steady and running (its start is
// over): what it uses then is what it serves with, and [serve] idle
// counts.
func (c *lifecycle) serving() bool { return c.steady() && c.state == api.StateRunning }

// stoppedAsleep reports an instance asleep with its child stopped.
func (c *lifecycle) stoppedAsleep() bool { return c.run.child == nil && c.state == api.StateAsleep }

// fallingAsleep reports a step into a serving = false profile under way:
// its live change (the door drains, enter runs) or the child's stop.
func (c *lifecycle) fallingAsleep() bool {
	return c.acts.run != nil && c.acts.run.sleeping || c.plan != nil && c.plan.sleep
}

// restartPlan is a restart or a sleep that gpuguard itself began (a step
// into a profile with live = false, a critical restart, a manual step, a
// reload, a sleep by stopping the child).
type restartPlan struct {
	level   int
	reason  string // watermark | critical | manual | recovered | reload | idle | request
	from    string // the profile the stopped child runs in
	sleep   bool   // no restart: the instance sleeps in level
	replies []chan response
}

// startWait is the wait before the next start: the level it aims for,
// the backoff, and the dead child's processes whose GPU memory must go
// first.
type startWait struct {
	target    int         // the level the next start aims for
	why       core.Reason // why it happens: the core's Relaunch, Requested or wake says
	waitSince time.Time
	release   map[int]bool // dead child's processes whose memory must go
	waitNoted bool         // the wait for memory was told
	backoff   timer
}

// stopRun is a stop under way: an operator's signal, or gpuguard's own
// (on_gpu_lost = "stop").
type stopRun struct {
	stopping bool
	stopWait timer // stop_timeout, then SIGKILL to the group
	// asked is the signal of the last stop asked of the child (sent once
	// a drain ends): while stopWait runs, the one it got.
	asked syscall.Signal
	// stoppingSent: STOPPING=1 went out (it is sent once).
	stoppingSent bool
}

// ending is how Run ends, once finished.
type ending struct {
	finished bool
	code     int
	err      error
}

// enterWaiting prepares the next start at level, for why: it waits (on
// samples) for the dead child's processes to free their GPU memory, then
// for a profile that fits. An immediate sample is taken so a restart need
// not wait for the next period.
func (c *lifecycle) enterWaiting(level int, release map[int]bool, why core.Reason) {
	c.state = api.StateWaiting
	c.wait.target, c.wait.why = level, why
	c.wait.release = release
	c.wait.waitSince = time.Now()
	c.wait.waitNoted = false
	c.sampleNow()
}

// restartAfter starts the next child in level, for why, once delay (the
// backoff) has passed and release's GPU memory is freed.
func (c *lifecycle) restartAfter(delay time.Duration, level int, release map[int]bool, why core.Reason) {
	if delay <= 0 {
		c.enterWaiting(level, release, why)
		return
	}
	c.wait.target, c.wait.release, c.wait.why = level, release, why
	c.state = api.StateBackoff
	c.wait.backoff.arm(delay)
}

// beginRestart stops the child with stop_signal so that it restarts in
// level (GPUGUARD_LAST_EXIT=watermark), or, for a sleep, so that the
// instance sleeps in level with no child: a serving = false profile
// entered without live actions (live = false, or no enter:
// core.StopsToSleep) frees the child's memory, and nothing restarts it
// until the instance leaves the profile. Any server, even one with no
// admin API (TGI), can share a GPU on demand this way.
func (c *lifecycle) beginRestart(pol *policy.Policy, level int, reason string, reply chan response, sleep bool) {
	plan := &restartPlan{level: level, reason: reason, from: pol.Profiles[c.level].Name, sleep: sleep}
	if reply != nil {
		plan.replies = append(plan.replies, reply)
	}
	c.plan = plan
	c.state = api.StateStepping
	if sleep {
		c.out.Logf("stopping the child to sleep in profile %s (%s)", pol.Profiles[level].Name, reason)
	} else {
		c.out.Logf("restarting the child in profile %s (%s)", pol.Profiles[level].Name, reason)
	}
	c.stopChild(pol.Restart.StopSignal, pol.Restart.StopTimeout)
}

// stopChild stops the child with sig, as gpuguard's own stops do: through
// the front door's drain, then timeout before its group is killed.
func (c *lifecycle) stopChild(sig syscall.Signal, timeout time.Duration) {
	c.stop.asked = sig
	c.door.stop(c.run.child, sig, timeout, &c.stop.stopWait)
}

// record writes the state file for the level in force (why) and publishes
// what it says; a failed write is logged.
func (c *lifecycle) record(pol *policy.Policy, why string) {
	st, err := c.file.writeAt(pol.Profiles[c.level], c.level, why)
	if err != nil {
		c.out.Logf("%v", err)
		return
	}
	c.out.publish(st)
}

// failPlan fails the replies of a restart under way (the run is ending).
func (c *lifecycle) failPlan() {
	if c.plan == nil {
		return
	}
	for _, r := range c.plan.replies {
		r <- response{err: errShutdown}
	}
	c.plan = nil
}

// finish ends the run with code. err, if any, is what Run returns: the
// caller prints it, so it is not logged here as well.
func (c *lifecycle) finish(code int, err error) {
	c.end.finished, c.end.code, c.end.err = true, code, err
	c.wait.backoff.stop()
	c.failPlan()
	c.notifyStopping()
}

// notifyStopping tells the service manager, once, that gpuguard is
// stopping: as a stop begins, or at the latest when Run ends.
func (c *lifecycle) notifyStopping() {
	if c.notifier != nil && !c.stop.stoppingSent {
		c.stop.stoppingSent = true
		_ = c.notifier.Stopping()
	}
}

// signalled is the stop signal the child was sent and has not yet
// answered by exiting (0: none; a drain not yet over has sent nothing).
func (c *lifecycle) signalled() syscall.Signal {
	if c.run.child == nil || !c.stop.stopWait.armed() {
		return 0
	}
	return c.stop.asked
}
