package supervisor

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
	"github.com/gpuguard/gpuguard/supervisor/core"
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
	s.act.lastRequest.Store(time.Now().UnixNano())
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
func (c *lifecycle) fellAsleep(pol *policy.Policy) {
	plan := c.plan
	c.plan = nil
	name := pol.Profiles[plan.level].Name
	c.asleep(pol, plan.level, fmt.Sprintf("asleep in profile %s (%s): the child is stopped", name, plan.reason))
	if len(plan.replies) > 0 {
		c.snapshot()
	}
	for _, r := range plan.replies {
		r <- response{profile: name}
	}
}

// asleep makes the instance asleep in level with no child, the state
// file saying why: it stays so until it leaves the profile (wakeStopped),
// through the normal start path.
func (c *lifecycle) asleep(pol *policy.Policy, level int, why string) {
	c.level, c.wait.target = level, level
	c.state = api.StateAsleep
	c.record(pol, why)
	c.out.Logf("asleep in profile %s: no child runs until the instance leaves it", pol.Profiles[level].Name)
}

// wakeStopped leaves a stopped sleep for level (above the current one) at
// watermark ratio: into another serving = false profile by a change of
// the state file alone, else by starting the child again, as soon as
// level fits. reply, if any, gets the profile at the start.
func (c *lifecycle) wakeStopped(pol *policy.Policy, ratio float64, level int, reason, why string, reply chan response) {
	c.out.Emit(stepEvent(pol, c.level, ratio, api.EventStepUp, level, reason, why))
	name := pol.Profiles[level].Name
	if !pol.Profiles[level].Serving() {
		c.level, c.wait.target = level, level
		c.record(pol, why)
		if reply != nil {
			c.snapshot()
			reply <- response{profile: name}
		}
		return
	}
	plan := &restartPlan{level: level, reason: reason, from: pol.Profiles[c.level].Name}
	if reply != nil {
		plan.replies = append(plan.replies, reply)
	}
	c.plan = plan
	c.out.Logf("waking: starting the child in profile %s (%s)", name, why)
	c.level = level
	c.enterWaiting(level, nil, core.Reason(reason))
}
