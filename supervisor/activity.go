package supervisor

import (
	"sync/atomic"
	"time"
)

// activity is what [serve] idle and keep_awake count from: the front
// door's requests (in flight, held, when the last answer ended) and the
// server's last wake. It is read by the loop (the idle rule, a peer's ask
// to sleep), by Status (in_flight, idle_seconds) and by the `tenant`
// answer (what a peer that needs room sees), so it is safe from any
// goroutine: the door's counts are its own, the times are atomics.
type activity struct {
	door Door // nil: no front door
	// lastRequest is the newest arrival at the door (Requested); awake the
	// later of the child's first ready and its last wake; unix ns.
	lastRequest atomic.Int64
	awake       atomic.Int64
}

// idleness is one reading of the activity.
type idleness struct {
	// busy: a request is in flight or held at the door.
	busy           bool
	inFlight, held int
	// since is the later of the last answer's end (or, for a request the
	// door answered itself, its arrival) and the last wake: idle time
	// counts from it. lastUsed leaves the wake out (the last request's
	// end, else its arrival), else it is since: least recently used.
	since, lastUsed time.Time
}

// woke records that the server became able to serve at t (its first
// healthy answer, or a wake): idle time counts from here.
func (a *activity) woke(t time.Time) { a.awake.Store(t.UnixNano()) }

// read reads the activity now.
func (a *activity) read() idleness {
	var i idleness
	if a.door != nil {
		i.inFlight, i.held = a.door.InFlight(), a.door.Held()
		i.busy = i.inFlight > 0 || i.held > 0
		i.lastUsed = a.door.LastAnswer()
	}
	if n := a.lastRequest.Load(); n != 0 {
		i.lastUsed = later(i.lastUsed, time.Unix(0, n))
	}
	i.since = i.lastUsed
	if n := a.awake.Load(); n != 0 {
		i.since = later(i.since, time.Unix(0, n))
	}
	if i.lastUsed.IsZero() {
		i.lastUsed = i.since
	}
	return i
}

// idle is how long the server has been idle at now: 0 while busy, and
// counted from floor when nothing happened yet.
func (i idleness) idle(now, floor time.Time) time.Duration {
	if i.busy {
		return 0
	}
	return max(now.Sub(later(i.since, floor)), 0)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
