package core

import (
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/policy"
)

// The sleep and wake rules: which serving = false profile an idle server
// sleeps in, when a held request wakes it and into which profile, and
// whether a sleep stops the child. The loop performs what they say.

// Why a step into or out of a serving = false profile happened, beside
// the watermark rules' reasons.
const (
	IdleSleep   Reason = api.ReasonIdle    // no request for [serve] idle: to the first serving = false profile
	RequestWake Reason = api.ReasonRequest // a request held while asleep: to the nearest serving profile
)

// IdleCheck is a sample's chance to apply [serve] idle. Ready: the
// server can answer (its first healthy answer came, it runs, nothing
// else is under way); Busy: a request is in flight or held at its door,
// so it is not idle at all; Since is the newest of its start, its last
// wake and the end of its last answer.
type IdleCheck struct {
	Now, Since  time.Time
	Ready, Busy bool
}

// Wake is a chance to wake a sleeping server for a held request: the
// request itself (Request; Stopping: a stop is under way or the run is
// over, and nothing wakes), or a sample while a wake is wanted
// (Claim.Due set). Stopped: asleep with the child stopped; Live: asleep
// with the child running and nothing else under way; Waiting: a start
// waits; Sleeping: a step into a serving = false profile is under way
// (the door drains, its enter runs, or the child is being stopped), and
// the wish waits for its end. Reading (nil: none, or the probe is down),
// Tree and Served judge a live wake's fit (WakeFit).
type Wake struct {
	Now               time.Time
	Request, Stopping bool
	// Held: the door holds requests now (a wake with none left waiting
	// makes no room).
	Held                   bool
	Stopped, Live, Waiting bool
	Sleeping               bool
	Reading                *Reading
	Tree                   map[int]bool
	Served                 uint64
	Claim                  Claim
}

// Woke is how a live wake's change went (Taken false: its state file
// could not be written): the start it claimed lasts until the woken
// server's memory settles, from Used (as Launched).
type Woke struct {
	Now   time.Time
	Taken bool
	Used  uint64
}

func (IdleCheck) input() {}
func (Wake) input()      {}
func (Woke) input()      {}

// idle steps a server that has had no request for [serve] idle down to
// the first serving = false profile. The count starts when it became
// ready, never at its launch: a server still loading its weights has not
// been idle, it has not been able to answer; and it does not run while a
// request is in flight or held: a stream longer than idle is never cut.
// The step cannot be taken
// back by NotTaken (the grace after it holds either way).
func (st State) idle(g Given, in IdleCheck) (State, []Effect) {
	pol := g.Policy
	idle := pol.Serve.Idle
	if idle <= 0 || !in.Ready || in.Busy || !pol.Profiles[g.Level].Serving() {
		return st, nil
	}
	to := FirstAsleep(pol.Profiles)
	if to < 0 || in.Now.Sub(in.Since) < idle {
		return st, nil
	}
	st.steppedForGood(in.Now)
	return st, []Effect{Step{Now: in.Now, To: to, Reason: IdleSleep, Why: fmt.Sprintf("no request for %s", idle), Event: api.EventStepDown}}
}

// wakeUp steps up to the nearest serving profile (WakeTo) for a held
// request ([serve] wake), as soon as it can. A request held while a step
// into a serving = false profile is under way is a wish too: it waits
// for that step's end, then wakes the instance like any other, so that
// no held request waits out hold in a sleeping instance that could wake.
// A stopped child is started again (the start waits for that profile to
// fit, in the shared-GPU start order); a sleeping one is woken live once
// the profile fits (WakeFit) and, on a shared GPU, once it holds the
// one-start-at-a-time claim: a server that wakes takes back the memory
// it freed, as a start takes memory. Until then every sample tries again,
// and the request waits, up to hold.
func (st State) wakeUp(g Given, in Wake) (State, []Effect) {
	pol := g.Policy
	if in.Request {
		if !pol.Serve.Wake || in.Stopping || pol.Profiles[g.Level].Serving() && !in.Sleeping {
			return st, nil
		}
		st.wake = true
	}
	if !st.wake || in.Sleeping {
		return st, nil // a step into sleep ends first: the wake follows it (the loop asks again then)
	}
	to := WakeTo(pol.Profiles, g.Level)
	if to < 0 {
		st.wake = false
		st.room.reset()
		var effs []Effect
		if !in.Waiting {
			effs = st.claim.endGranted() // a wake's claim, no longer needed
		}
		return st, effs
	}
	const why = "a request arrived while asleep"
	switch {
	case in.Stopped:
		st.wake = false
		return st, []Effect{WakeStopped{To: to, Reason: RequestWake, Why: why}}
	case in.Live:
		// It does not fit: its GPU's idle peers may sleep for it
		// (room.go); it fits: a wait for room ends.
		effs, _ := st.room.want(g, wakeNeed(g, in, to))
		if WakeFit(pol, g.Level, to, in.Reading, in.Tree, in.Served) != "" {
			effs = append(effs, st.claim.endGranted()...) // the claim's fresh sample says it does not fit
			return st, effs
		}
		geffs, ok := st.claim.gate(in.Claim, true, pol.Watch.Settle)
		effs = append(effs, geffs...)
		if !ok {
			return st, effs
		}
		st.wake = false
		st.steppedForGood(in.Now)
		return st, append(effs, Step{Now: in.Now, To: to, Reason: RequestWake, Why: why, Event: api.EventStepUp, Wake: true})
	}
	return st, nil
}

// woke follows a live wake: taken, its claim lasts until the woken
// server's memory settles; not taken, the claim ends.
func (st State) woke(g Given, in Woke) (State, []Effect) {
	var effs []Effect
	if in.Taken {
		effs = st.claim.began(in.Now, in.Used, g.Policy.Watch.Settle)
	} else {
		effs = st.claim.endGranted()
	}
	return st, effs
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

// wakeNeed is what a live wake into profile to needs of its GPUs, to
// make room for, judged as WakeFit judges it: to's needs (else what the
// server used when it last served), against the usage without the
// instance's own. Room is asked for only while a request is held.
func wakeNeed(g Given, in Wake, to int) roomNeed {
	pol := g.Policy
	n := roomNeed{now: in.Now, allowed: in.Claim.Peers && pol.Serve.MakeRoom && !g.Observe && in.Held}
	if in.Reading == nil {
		return n
	}
	n.devices, n.own = in.Reading.Devices, ownUse(pol, g.Level, in.Reading, in.Tree)
	n.bytes = wakeNeeds(pol.Profiles[to], in.Served)
	return n
}
