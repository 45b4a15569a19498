package supervisor

import (
	"fmt"

	"github.com/gpuguard/gpuguard/api"
)

// A serving = false profile entered without live actions (live = false,
// or no enter) is slept in by stopping the child: its memory is free,
// child_pid is 0, and nothing restarts it until the instance leaves the
// profile. Any server, even one with no admin API (TGI), can share a GPU
// on demand this way.

// beginSleep stops the child so that the instance sleeps in level: the
// exit ends in fellAsleep, not in a restart.
func (l *loop) beginSleep(level int, reason string, reply chan response) {
	l.life.plan = &restartPlan{level: level, reason: reason, from: l.pol.Profiles[l.level].Name, sleep: true}
	if reply != nil {
		l.life.plan.replies = append(l.life.plan.replies, reply)
	}
	l.life.state = api.StateStepping
	l.deps.Logf("stopping the child to sleep in profile %s (%s)", l.pol.Profiles[level].Name, reason)
	l.door.stop(l.life.run.child, l.pol.Restart.StopSignal, l.pol.Restart.StopTimeout, &l.life.stop.stopWait)
}

// fellAsleep handles the exit of a child stopped to sleep: the instance
// is now asleep in the plan's profile, with no child.
func (l *loop) fellAsleep() bool {
	plan := l.life.plan
	if plan == nil || !plan.sleep {
		return false
	}
	l.life.plan = nil
	name := l.pol.Profiles[plan.level].Name
	l.asleepNoChild(plan.level, fmt.Sprintf("asleep in profile %s (%s): the child is stopped", name, plan.reason))
	if len(plan.replies) > 0 {
		l.publishSnapshot()
	}
	for _, r := range plan.replies {
		r <- response{profile: name}
	}
	return true
}

// asleepNoChild makes the instance asleep in level with no child, the
// state file saying why: it stays so until it leaves the profile
// (wakeStopped), through the normal start path.
func (l *loop) asleepNoChild(level int, why string) {
	l.level, l.life.wait.target = level, level
	l.life.state = api.StateAsleep
	st, err := l.stateFile.writeAt(l.pol.Profiles[l.level], l.level, why)
	if err != nil {
		l.deps.Logf("%v", err)
	} else {
		l.out.publish(st)
	}
	l.deps.Logf("asleep in profile %s: no child runs until the instance leaves it", l.pol.Profiles[level].Name)
}

// startAsleep begins the run asleep, with no child, when the start level
// serves nothing: a child started there would serve against its profile.
func (l *loop) startAsleep() bool {
	if l.pol.Profiles[l.life.wait.target].Serving() {
		return false
	}
	l.asleepNoChild(l.life.wait.target, "start: asleep in profile "+l.pol.Profiles[l.life.wait.target].Name)
	return true
}

// stoppedAsleep reports an instance asleep with its child stopped.
func (l *loop) stoppedAsleep() bool {
	return l.life.run.child == nil && l.life.state == api.StateAsleep
}

// wakeStopped leaves a stopped sleep for level (above the current one):
// into another serving = false profile by a change of the state file
// alone, else by starting the child again, as soon as level fits. reply,
// if any, gets the profile at the start.
func (l *loop) wakeStopped(level int, reason, why string, reply chan response) {
	l.emit(stepEvent(l.pol, l.level, l.latest.ratio, api.EventStepUp, level, reason, why))
	name := l.pol.Profiles[level].Name
	if !l.pol.Profiles[level].Serving() {
		l.level, l.life.wait.target = level, level
		st, err := l.stateFile.writeAt(l.pol.Profiles[l.level], l.level, why)
		if err != nil {
			l.deps.Logf("%v", err)
		} else {
			l.out.publish(st)
		}
		if reply != nil {
			l.publishSnapshot()
			reply <- response{profile: name}
		}
		return
	}
	l.life.plan = &restartPlan{level: level, reason: reason, from: l.pol.Profiles[l.level].Name}
	if reply != nil {
		l.life.plan.replies = append(l.life.plan.replies, reply)
	}
	l.deps.Logf("waking: starting the child in profile %s (%s)", name, why)
	l.level = level
	l.life.enterWaiting(level, nil)
}

// manualWake is `step up` while the child is stopped asleep.
func (l *loop) manualWake(r request) bool {
	if !l.stoppedAsleep() || !r.up || l.level == 0 {
		return false
	}
	l.wakeStopped(l.level-1, api.ReasonManual, "manual step up", r.reply)
	return true
}
