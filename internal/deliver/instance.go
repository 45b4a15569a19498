package deliver

import (
	"context"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/policy"
)

// Instance is the supervised instance as the deliverer needs it
// (supervisor.TaskHost implements it). Its calls may block on the
// supervisor's loop; they end with ctx or once the supervisor has stopped.
type Instance interface {
	// Reserve decides a reservation as the control socket's reserve does;
	// quiet journals a granted one only (the deliverer asks for each
	// queued task at every sample while memory is short, and would
	// journal a defer each time).
	Reserve(ctx context.Context, req admission.Request, quiet bool) (admission.Decision, error)
	// Release ends a lease.
	Release(ctx context.Context, lease string) error
	// Journal journals ev as one of the instance's events, in order with
	// its own.
	Journal(ctx context.Context, ev api.Event) error
	// Replayable reports whether a deferred request may be replayed now:
	// memory is not short and the child is ready.
	Replayable() bool
	// Defer is the [defer] table in force (a reload may change it).
	Defer() policy.Defer
}

// Options are the rest of what New takes; all may be zero.
type Options struct {
	// Store is the deferred-task store; nil: the instance has no queue,
	// and answers as one without (a reservation with a payload is decided
	// as one without; done, failed and notes are refused).
	Store Store
	// Replayer replays the front door's deferred requests (tasks of tool
	// http); nil: they wait in the queue.
	Replayer Replayer
	// Shared says other processes write Store (a Redis store, shared by
	// the instances of this name on every host): the deliverer then looks
	// for tasks it was not told of every few seconds, even with an empty
	// queue.
	Shared bool
	// Logf prints one human-readable line (the store's failures, a dead
	// task).
	Logf func(format string, args ...any)
}

// Run delivers tasks until ctx ends, which the supervisor ends when it
// stops; without a store it returns at once.
func (q *Tasks) Run(ctx context.Context) {
	if q.d != nil {
		q.d.run(ctx)
	}
}

// Poke tells the deliverer that a sample was taken, so memory may have
// freed. It wakes the deliverer only while a queued task waits for memory
// or for the child, which only a sample tells; whatever else lets a task
// go (a deferral, a subscriber, a finished task, a released lease, a
// timer of its own) wakes it itself, so a sample costs an idle deliverer
// one atomic load. It never blocks.
func (q *Tasks) Poke() {
	if d := q.d; d != nil && d.awaitsSample.Load() {
		d.poke()
	}
}

// LeaseReleased tells the deliverer that the instance's ledger let lease
// go (on the supervisor's loop): a task's released lease frees the
// one-at-a-time slot.
func (q *Tasks) LeaseReleased(lease string) {
	if d := q.d; d != nil && lease != "" {
		d.slot.released(lease)
		d.poke()
	}
}

// ChildExited tells the deliverer that the child exited (on the
// supervisor's loop): the leases ended with it, and the tasks in flight go
// back to the queue.
func (q *Tasks) ChildExited() {
	if d := q.d; d != nil {
		d.slot.childExited()
		d.poke()
	}
}
