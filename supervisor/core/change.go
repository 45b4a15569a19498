package core

import "github.com/gpuguard/gpuguard/policy"

// How is the way a change of profile is made.
type How int

// The ways of changing profile.
const (
	// ByLive: in place (state file, notify signal, event).
	ByLive How = iota
	// ByActions: in place through the server's own actions (the door
	// drains, the calls are made off the loop, a failed one falls back to
	// a restart).
	ByActions
	// ByRestart: a graceful restart into the profile.
	ByRestart
	// BySleep: the child is stopped, and the instance sleeps in the
	// profile (serving = false without live actions).
	BySleep
)

// HowToChange is the way from profile from to profile to, calls being the
// server actions the change would make (the running profile's leave, if
// it was entered live, and to's enter). A serving = false profile without
// live actions is slept in by stopping the child; leaving a serving =
// false profile takes the actions' path even with no call to make
// (Ollama reloads by itself: the door must open again).
func HowToChange(pol *policy.Policy, from, to int, calls int) How {
	p := pol.Profiles[to]
	switch {
	case StopsToSleep(p):
		return BySleep
	case p.Live && (calls > 0 || !pol.Profiles[from].Serving()):
		return ByActions
	case !p.Live:
		return ByRestart
	}
	return ByLive
}
