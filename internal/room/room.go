// Package room is the choice of who sleeps to make room on a shared GPU:
// which tenants may be put to sleep for a peer that needs their memory
// (Why), in which order (Rank), and how few of them cover the shortfall
// (Choose). It is pure, so that every rule is one row of a table, apart
// from the coordinator that asks the tenants (package tenants) and the
// decision core that accepts or refuses a sleep for this instance
// (supervisor/core, which imports it).
//
// The order is a comparator chain, as kubelet's eviction ranking is:
// lowest priority first, then least recently used, then most memory on
// the GPU, then by name. The contract's words are in docs/sharing.md,
// "Making room".
package room

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Candidate is one tenant of the GPU as making room judges it, with facts
// read fresh when the room is asked for.
type Candidate struct {
	Name     string
	Priority int
	// Serving: in a serving profile with nothing else under way. CanSleep:
	// it has a serving = false profile, a front door and [serve] wake =
	// true, so a request brings it back. Observe: --observe.
	Serving, CanSleep, Observe bool
	// Busy: a request is in flight or held at its door. Idle: since the
	// later of its last answer's end and its last wake. KeepAwake: its own
	// [serve] keep_awake.
	Busy      bool
	Idle      time.Duration
	KeepAwake time.Duration
	// LastUsed: its last answer, else its first ready (least recently
	// used sleeps first).
	LastUsed time.Time
	// UsedBytes is what it uses on the GPU now; SleepBytes what its
	// sleeping profile still needs.
	UsedBytes, SleepBytes uint64
}

// Frees is what putting c to sleep would free: its usage less its
// sleeping profile's needs (0 when that is more).
func (c Candidate) Frees() uint64 {
	if c.UsedBytes <= c.SleepBytes {
		return 0
	}
	return c.UsedBytes - c.SleepBytes
}

// Why says why c may not be put to sleep for an asker of priority asker,
// "" when it may. Busy and higher-priority peers are never candidates.
func Why(c Candidate, asker int) string {
	switch {
	case c.Observe:
		return "it is in observe mode"
	case !c.CanSleep:
		return "it cannot sleep and be woken by a request (no serving = false profile, no front door, or wake = false)"
	case !c.Serving:
		return "it is not serving (asleep, starting or stepping)"
	case c.Busy:
		return "a request is in flight or held at its door"
	case c.Idle < c.KeepAwake:
		return fmt.Sprintf("it answered or woke %s ago, within its keep_awake %s", c.Idle.Round(time.Millisecond), c.KeepAwake)
	case c.Priority > asker:
		return fmt.Sprintf("its priority %d is higher than the asker's %d", c.Priority, asker)
	}
	return ""
}

// BusyRetry is how soon a peer kept from being a candidate only by a
// request in flight or held is worth asking about again: its answer may
// end any moment.
const BusyRetry = 100 * time.Millisecond

// Soon says how long until c may be a candidate for an asker of priority
// asker when only time stands in its way: its request in flight or held
// (BusyRetry), or its keep_awake (what is left of it); false when
// something else keeps it out, or when it is a candidate now.
func Soon(c Candidate, asker int) (time.Duration, bool) {
	if Why(c, asker) == "" {
		return 0, false
	}
	later := c
	later.Busy, later.Idle = false, max(c.Idle, c.KeepAwake)
	if Why(later, asker) != "" {
		return 0, false
	}
	if c.Busy {
		return BusyRetry, true
	}
	return c.KeepAwake - c.Idle, true
}

// Rank returns the candidates of cs for an asker of priority asker (Why
// says ""), in the order they are put to sleep.
func Rank(cs []Candidate, asker int) []Candidate {
	var out []Candidate
	for _, c := range cs {
		if Why(c, asker) == "" {
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, sleepsFirst)
	return out
}

// sleepsFirst orders two candidates, negative when a sleeps before b: a
// comparator chain (the first that tells them apart decides), as kubelet's
// eviction ranking is built: lowest priority, then least recently used,
// then most memory on the GPU, then by name.
func sleepsFirst(a, b Candidate) int {
	return cmp.Or(
		cmp.Compare(a.Priority, b.Priority),
		a.LastUsed.Compare(b.LastUsed),
		cmp.Compare(b.UsedBytes, a.UsedBytes),
		cmp.Compare(a.Name, b.Name),
	)
}

// Choose returns the fewest candidates, in Rank's order, whose sleeps
// together free at least shortfall bytes, and what all the candidates
// together would free. None when they cannot cover it: then nobody
// sleeps. The candidates are taken in order until they cover the
// shortfall; one taken earlier that the later ones cover without is left
// out again (its sleep would free nothing the asker needs), so a small
// model is not put to sleep beside a large one that makes the room alone.
func Choose(cs []Candidate, asker int, shortfall uint64) (sleepers []Candidate, couldFree uint64) {
	ranked := Rank(cs, asker)
	for _, c := range ranked {
		couldFree += c.Frees()
	}
	if couldFree < shortfall || shortfall == 0 {
		return nil, couldFree
	}
	var sum uint64
	for _, c := range ranked {
		if sum >= shortfall {
			break
		}
		if c.Frees() == 0 {
			continue
		}
		sleepers = append(sleepers, c)
		sum += c.Frees()
	}
	// Leave out, first in order, any sleeper the others cover without.
	for i := 0; i < len(sleepers); {
		if sum-sleepers[i].Frees() >= shortfall {
			sum -= sleepers[i].Frees()
			sleepers = slices.Delete(sleepers, i, i+1)
			continue
		}
		i++
	}
	return sleepers, couldFree
}
