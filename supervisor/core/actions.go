package core

import (
	"fmt"
	"time"
)

// The end of a live change through server actions: done, the instance is
// in the new profile and what the change relieved is measured after
// `grace` (measure.go); failed, the change falls back to the profile's
// non-live form. The loop runs the calls off its goroutine and hands the
// outcome in as ActionsDone.

// ActionsDone is the outcome of a live change through server actions
// from the level to To, made for Reason (Why is its detail, the state
// file's reason): Failed, an action failed (a status that is not
// success, no answer within its timeout, a refused connection); Gone, a
// reload removed To's profile while the calls ran. Before is the memory
// the change was to relieve, read before it began as Measured's Used is
// (Known false: there was no reading then).
type ActionsDone struct {
	Now          time.Time
	To           int
	Reason       Reason
	Why          string
	Failed, Gone bool
	Before       uint64
	Known        bool
}

// Entered ends a live change through actions that went well: the
// instance is in To now (the state file, the notify signal, the
// publication; the front door opens again unless To serves nothing).
type Entered struct {
	To  int
	Why string
}

// FallBack is a failed live change's non-live form, as for live = false:
// a graceful restart into To, or, when To serves nothing (Sleep),
// stopping the child to sleep there. The server is never left in an
// unknown state. Reason is the step's: the restart's launch names it.
type FallBack struct {
	To     int
	Sleep  bool
	Reason Reason
}

func (ActionsDone) input() {}
func (Entered) effect()    {}
func (FallBack) effect()   {}

// actionsDone ends a live change through actions: entered, and measured
// when it went down the ladder; or, when an action failed or the profile
// is gone, fallen back to the non-live form of the profile (the lowest
// there is now, for a gone one).
func (st State) actionsDone(g Given, in ActionsDone) (State, []Effect) {
	pol := g.Policy
	if in.Failed || in.Gone {
		to := in.To
		if in.Gone {
			to = min(g.Level, len(pol.Profiles)-1)
		}
		if !pol.Profiles[to].Serving() {
			return st, []Effect{FallBack{To: to, Sleep: true, Reason: in.Reason}}
		}
		return st, []Effect{
			Log{fmt.Sprintf("falling back to a restart into profile %s", pol.Profiles[to].Name)},
			FallBack{To: to, Reason: in.Reason},
		}
	}
	if in.To > g.Level {
		st.measure = &measuring{at: in.Now, steps: st.rules.steps, from: g.Level, to: in.To, before: in.Before, known: in.Known}
	}
	return st, []Effect{Entered{To: in.To, Why: in.Why}}
}
