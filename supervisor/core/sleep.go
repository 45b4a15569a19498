package core

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// The sleep and wake rules: which serving = false profile an idle server
// sleeps in, which profile a held request wakes it into, and whether a
// sleep stops the child. The loop's sleeper (supervisor/sleep.go) asks
// them and performs what they say.

// Why a step into or out of a serving = false profile happened, beside
// the watermark rules' reasons.
const (
	IdleSleep   Reason = api.ReasonIdle    // no request for [serve] idle: to the first serving = false profile
	RequestWake Reason = api.ReasonRequest // a request held while asleep: to the nearest serving profile
)

// IdleCheck is a sample's chance to apply [serve] idle. Ready: the
// server can answer (its first healthy answer came, it runs, nothing
// else is under way); Since is the newest of its start, its last wake
// and the last request.
type IdleCheck struct {
	Now, Since time.Time
	Ready      bool
}

// PeerNobody is the tenants' answer that nobody can step lower while the
// watermark is high: on shared GPU GPU, or (Shared false) on a GPU of
// this instance's own, where it cannot either.
type PeerNobody struct {
	Now    time.Time
	Ratio  float64
	GPU    string
	Shared bool
}

func (IdleCheck) input()  {}
func (PeerNobody) input() {}

// idle steps a server that has had no request for [serve] idle down to
// the first serving = false profile. The count starts when it became
// ready, never at its launch: a server still loading its weights has not
// been idle, it has not been able to answer. The step cannot be taken
// back by NotTaken (the grace after it holds either way, as it did when
// the loop decided it).
func (st State) idle(in IdleCheck) (State, []Effect) {
	pol := st.Policy
	idle := pol.Serve.Idle
	if idle <= 0 || !in.Ready || !pol.Profiles[st.Level].Serving() {
		return st, nil
	}
	to := FirstAsleep(pol.Profiles)
	if to < 0 || in.Now.Sub(in.Since) < idle {
		return st, nil
	}
	st.Rules.Stepped(in.Now)
	st.undo = nil
	return st, []Effect{Step{Now: in.Now, To: to, Reason: IdleSleep, Why: fmt.Sprintf("no request for %s", idle), Event: api.EventStepDown}}
}

// nobody is the rate-limited `critical` alarm when the watermark is at or
// above critical and no tenant can step lower.
func (st State) nobody(in PeerNobody) (State, []Effect) {
	wm := st.Policy.Watermark
	if !st.Rules.FloorAlarm(in.Now, in.Ratio, wm) {
		return st, nil
	}
	detail := fmt.Sprintf("watermark %.2f >= critical %.2f at the last profile; nothing lower to step to", in.Ratio, wm.Critical)
	if in.Shared {
		detail = fmt.Sprintf("watermark %.2f >= critical %.2f and no tenant of shared GPU %s can step lower", in.Ratio, wm.Critical, in.GPU)
	}
	return st, []Effect{Journal{api.Event{Event: api.EventCritical, Watermark: in.Ratio, GPU: in.GPU, Detail: detail}}, Log{detail}}
}

// StopsToSleep reports whether entering profile p means stopping the
// child: a serving = false profile without live actions (live = false,
// or no enter). Any server, even one with no admin API, can share a GPU
// on demand this way.
func StopsToSleep(p policy.Profile) bool {
	return !p.Serving() && (!p.Live || len(p.Enter) == 0)
}

// WakeTo is the profile a held request wakes an instance at level into:
// the nearest serving profile above it, or -1 when there is nothing to
// wake into (level serves already, or no profile above it serves).
func WakeTo(ps []policy.Profile, level int) int {
	if ps[level].Serving() {
		return -1
	}
	return NearestServing(ps, level)
}

// NearestServing is the serving profile of ps closest above level (every
// serving profile comes before every serving = false one), or -1.
func NearestServing(ps []policy.Profile, level int) int {
	for i := level; i >= 0; i-- {
		if ps[i].Serving() {
			return i
		}
	}
	return -1
}

// FirstAsleep is the first serving = false profile of ps, or -1.
func FirstAsleep(ps []policy.Profile) int {
	for i, p := range ps {
		if !p.Serving() {
			return i
		}
	}
	return -1
}
