package deliver

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// slot is the one-at-a-time slot and what competes for it: the
// subscribers, the tasks in flight, a done leasing the next task, the
// replays storing their answers. It is the deliverer's state that other
// goroutines change (a connection's done, a subscriber leaving, the
// loop's release or exit, a replay's end), each change one step under its
// lock; the store calls around them are the deliverer's.
type slot struct {
	mu      sync.Mutex
	subs    []taskSub // in the order they subscribed
	lastSub int64
	// flights are the tasks delivered and not finished, oldest first. At
	// most one holds the slot: the others' leases were released early,
	// and they stay delivered to their connections.
	flights []*taskFlight
	// finishing: a done is leasing the next task with its own commit
	// (AckLease), which holds the slot; ready are the tasks dones leased,
	// in flight already, for the deliverer to send.
	finishing bool
	ready     []readyTask
	// storing counts the replays whose answers are being written to the
	// store, out of flight already: they hold the slot too.
	storing int
	// after is the task the store told due after the last task a done
	// leased (AckLease): the next done leases it with no Peek (the store
	// leases it only if it is still the oldest due). Empty: peek.
	after api.Task
}

type taskSub struct {
	id      int64
	deliver func(api.TaskDelivery) bool
}

// taskFlight is a task delivered: its lease, and the subscription
// (connection) it went to.
type taskFlight struct {
	task     api.Task
	lease    string
	sub      int64
	deadline time.Time
	// exited: the child exited while the task ran; it goes back.
	exited bool
	// released: its subscriber released the lease before finishing it,
	// which lets the next task go (contract, "Delivering").
	released bool
}

// attempt is the attempt f is: the store counts an attempt only when one
// ends (task.Attempts), and f's is under way.
func (f *taskFlight) attempt() int { return f.task.Attempts + 1 }

// readyTask is a task leased by a done, for the deliverer to journal and
// send from its goroutine, as every other delivery, after the done's reply
// is written.
type readyTask struct {
	f   *taskFlight
	sub taskSub
}

// claim is a done's claim on the slot, to lease the next task for sub in
// its own commit; told is the task the store told due next (empty: none
// told, peek).
type claim struct {
	sub  taskSub
	told api.Task
}

// subscribe adds a subscriber and answers its id.
func (s *slot) subscribe(deliver func(api.TaskDelivery) bool) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSub++
	s.subs = append(s.subs, taskSub{id: s.lastSub, deliver: deliver})
	return s.lastSub
}

// unsubscribe removes subscriber id and takes its tasks out of flight.
func (s *slot) unsubscribe(id int64) []*taskFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = slices.DeleteFunc(s.subs, func(t taskSub) bool { return t.id == id })
	return s.takeLocked(func(f *taskFlight) bool { return f.sub == id })
}

// look answers what a pass needs: whether the slot is held, the earliest
// deadline in flight (released flights' included: their ack_timeout), and
// the subscriber next in turn (none: zero).
func (s *slot) look() (busy bool, deadline time.Time, next taskSub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flights {
		if !f.deadline.IsZero() && (deadline.IsZero() || f.deadline.Before(deadline)) {
			deadline = f.deadline
		}
	}
	if len(s.subs) > 0 {
		next = s.subs[0]
	}
	return s.busyLocked(), deadline, next
}

// busyLocked says a task holds the slot (s.mu held).
func (s *slot) busyLocked() bool {
	return s.finishing || s.storing > 0 || slices.ContainsFunc(s.flights, func(f *taskFlight) bool { return !f.released })
}

// take takes the flights that match out of flight.
func (s *slot) take(match func(*taskFlight) bool) []*taskFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked(match)
}

func (s *slot) takeLocked(match func(*taskFlight) bool) []*taskFlight {
	var out []*taskFlight
	s.flights = slices.DeleteFunc(s.flights, func(f *taskFlight) bool {
		if match(f) {
			out = append(out, f)
			return true
		}
		return false
	})
	return out
}

// takeFlight takes f out of flight, reporting whether it was still there
// (whoever takes a flight first finishes it).
func (s *slot) takeFlight(f *taskFlight) bool {
	return len(s.take(func(g *taskFlight) bool { return g == f })) > 0
}

// holds reports whether f is in flight.
func (s *slot) holds(f *taskFlight) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.flights, f)
}

// add puts f in flight (a replay, which no subscriber carries).
func (s *slot) add(f *taskFlight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flights = append(s.flights, f)
}

// board puts f in flight for sub and turns the subscribers, so that the
// next task goes to the next one; false when sub has gone meanwhile: f is
// not in flight, and goes back to the queue.
func (s *slot) board(f *taskFlight, sub taskSub) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boardLocked(f, sub)
}

func (s *slot) boardLocked(f *taskFlight, sub taskSub) bool {
	if !slices.ContainsFunc(s.subs, func(t taskSub) bool { return t.id == sub.id }) {
		return false
	}
	s.flights = append(s.flights, f)
	s.subs = append(slices.DeleteFunc(s.subs, func(t taskSub) bool { return t.id == sub.id }), sub)
	return true
}

// finish takes the task ticket, delivered on subscription sub, out of
// flight to finish it. With next, its done may lease the next task
// itself: it answers the claim when f held the slot, no other task holds
// it, and a subscriber waits. The claim then holds the slot (finishing)
// until unclaim or claimed, so that a pass does not lease the same task
// meanwhile, and takes the task told due after the last one, which only
// the claim's holder reads and writes.
func (s *slot) finish(sub int64, ticket string, next bool) (*taskFlight, *claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.flights, func(f *taskFlight) bool { return f.task.Ticket == ticket })
	switch {
	case i < 0:
		return nil, nil, fmt.Errorf("task %q is not in flight on this instance (unknown, finished, or put back after a timeout)", ticket)
	case s.flights[i].sub != sub:
		return nil, nil, fmt.Errorf("task %q was not delivered to this connection", ticket)
	}
	f := s.flights[i]
	s.flights = slices.Delete(s.flights, i, i+1)
	if !next || f.released || s.busyLocked() || len(s.subs) == 0 || s.subs[0].deliver == nil {
		return f, nil, nil
	}
	s.finishing = true
	c := &claim{sub: s.subs[0], told: s.after}
	s.after = api.Task{}
	return f, c, nil
}

// putBack puts f, taken out by finish, back in flight: its done was not
// recorded, and may be sent again.
func (s *slot) putBack(f *taskFlight) { s.add(f) }

// unclaim ends a claim that leased nothing.
func (s *slot) unclaim() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishing = false
}

// claimed ends a claim that leased f for sub, with after told due next:
// f boards, and is ready for the deliverer to send; false when sub has
// gone meanwhile (f goes back to the queue).
func (s *slot) claimed(f *taskFlight, sub taskSub, after api.Task) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishing = false
	s.after = after
	if !s.boardLocked(f, sub) {
		return false
	}
	s.ready = append(s.ready, readyTask{f: f, sub: sub})
	return true
}

// takeReady takes the tasks that dones leased, for the deliverer to send.
func (s *slot) takeReady() []readyTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	ready := s.ready
	s.ready = nil
	return ready
}

// released marks the flight holding lease as released, which frees the
// slot for the next task.
func (s *slot) released(lease string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flights {
		if f.lease == lease {
			f.released = true
		}
	}
}

// childExited marks every flight to go back to the queue: their leases
// ended with the child.
func (s *slot) childExited() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flights {
		f.exited = true
	}
}

// storeAnswer takes f out of flight to finish its replay, reporting
// whether it was still there (whoever takes a flight first finishes it);
// the slot stays held until storedAnswer, while the answer is written to
// the store: one task at a time.
func (s *slot) storeAnswer(f *taskFlight) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.takeLocked(func(g *taskFlight) bool { return g == f })) == 0 {
		return false
	}
	s.storing++
	return true
}

func (s *slot) storedAnswer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storing--
}
