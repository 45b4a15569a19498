package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Sleeping and waking as the loop performs them. The core decides when
// (core.IdleCheck, core.Wake) and which profile (core.WakeTo,
// core.StopsToSleep); a sleep that stops the child is a restart plan that
// does not restart (beginRestart), and its exit ends here (fellAsleep).

// Requested is the front door's report of a request's arrival; held says
// it found the child not ready, so it waits. It never blocks: the time is
// stored for the idle rule, and a held request asks the loop to wake a
// sleeping server ([serve] wake).
func (s *Supervisor) Requested(held bool) {
	s.lastRequest.Store(time.Now().UnixNano())
	if !held {
		return
	}
	select {
	case s.wanted <- struct{}{}:
	default: // a wake is already asked for
	}
}

// fellAsleep handles the exit of a child stopped to sleep: the instance
// is now asleep in the plan's profile, with no child.
func (l *loop) fellAsleep() {
	plan := l.life.plan
	l.life.plan = nil
	name := l.pol.Profiles[plan.level].Name
	l.asleep(plan.level, fmt.Sprintf("asleep in profile %s (%s): the child is stopped", name, plan.reason))
	if len(plan.replies) > 0 {
		l.publishSnapshot()
	}
	for _, r := range plan.replies {
		r <- response{profile: name}
	}
}

// asleep makes the instance asleep in level with no child, the state
// file saying why: it stays so until it leaves the profile (wakeStopped),
// through the normal start path.
func (l *loop) asleep(level int, why string) {
	l.life.level, l.life.wait.target = level, level
	l.life.state = api.StateAsleep
	l.record(why)
	l.deps.Logf("asleep in profile %s: no child runs until the instance leaves it", l.pol.Profiles[level].Name)
}

// wakeStopped leaves a stopped sleep for level (above the current one):
// into another serving = false profile by a change of the state file
// alone, else by starting the child again, as soon as level fits. reply,
// if any, gets the profile at the start.
func (l *loop) wakeStopped(level int, reason, why string, reply chan response) {
	l.out.emit(stepEvent(l.pol, l.life.level, l.latest.ratio, api.EventStepUp, level, reason, why))
	name := l.pol.Profiles[level].Name
	if !l.pol.Profiles[level].Serving() {
		l.life.level, l.life.wait.target = level, level
		l.record(why)
		if reply != nil {
			l.publishSnapshot()
			reply <- response{profile: name}
		}
		return
	}
	plan := &restartPlan{level: level, reason: reason, from: l.pol.Profiles[l.life.level].Name}
	if reply != nil {
		plan.replies = append(plan.replies, reply)
	}
	l.life.plan = plan
	l.deps.Logf("waking: starting the child in profile %s (%s)", name, why)
	l.life.level = level
	l.life.enterWaiting(level, nil)
}

// record writes the state file for the level in force (why) and publishes
// what it says; a failed write is logged.
func (l *loop) record(why string) {
	st, err := l.stateFile.writeAt(l.pol.Profiles[l.life.level], l.life.level, why)
	if err != nil {
		l.deps.Logf("%v", err)
		return
	}
	l.out.publish(st)
}
