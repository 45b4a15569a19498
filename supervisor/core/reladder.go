package core

import "github.com/gpuguard/gpuguard/policy"

// Relevel is what the loop does after a reload changed the ladder.
type Relevel int

const (
	// RelevelNothing: the running profile kept its level, or the child is
	// on its way out (it gets the new ladder's level at its next start).
	RelevelNothing Relevel = iota
	// RelevelWake: asleep with the child stopped, in a profile that now
	// serves requests; nothing else would ever start the child, so the
	// reload does, in the usual start (release, fit, start order).
	RelevelWake
	// RelevelRestart: the running profile is gone; the child restarts
	// gracefully at Level (GPUGUARD_LAST_EXIT=reload).
	RelevelRestart
	// RelevelRewrite: the running profile is at another level now; the
	// state file says so (no signal: what runs has not changed).
	RelevelRewrite
)

// Releveled is where a reload's new ladder puts the instance.
type Releveled struct {
	Level, Target, PlanLevel int
	From                     string // the profile it ran in
	Then                     Relevel
}

// Reladder follows the instance's levels in old (the running one, the
// next start's target, a restart plan's: -1 for none) into pol's ladder:
// a profile still there by its name, a profile gone at the same position
// or the last. It never moves an instance up by itself. stoppedAsleep:
// asleep with no child; running: a child runs that is not being stopped
// or restarted.
func Reladder(old, pol *policy.Policy, level, target, planLevel int, stoppedAsleep, running bool) Releveled {
	last := len(pol.Profiles) - 1
	follow := func(l int) (int, bool) {
		if i, ok := pol.ProfileIndex(old.Profiles[l].Name); ok {
			return i, true
		}
		return min(l, last), false
	}
	r := Releveled{From: old.Profiles[level].Name, PlanLevel: planLevel}
	r.Target, _ = follow(target)
	if planLevel >= 0 {
		r.PlanLevel, _ = follow(planLevel)
	}
	var kept bool
	r.Level, kept = follow(level)
	switch {
	case stoppedAsleep && pol.Profiles[r.Level].Serving():
		r.Then = RelevelWake
	case !running:
	case !kept:
		r.Then = RelevelRestart
	case r.Level != level:
		r.Then = RelevelRewrite
	}
	return r
}
