package supervisor

import (
	"context"
	"sync/atomic"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/policy"
)

// Deliverer is the deferred-task deliverer (internal/deliver) as the
// supervisor drives it: Run runs it for the run, and the loop tells it
// what may let a task go. Deps.Tasks makes it over the instance's
// TaskHost.
type Deliverer interface {
	// Run delivers until ctx ends: Run's context, ended when Run returns.
	Run(ctx context.Context)
	// Poke: a sample was taken, so a deferred task may fit now. It never
	// blocks.
	Poke()
	// LeaseReleased: the ledger let lease go (on the loop).
	LeaseReleased(lease string)
	// ChildExited: the child exited, and the leases with it (on the loop).
	ChildExited()
	// TaskCounts are the deferred tasks by state, for the status.
	TaskCounts() api.TaskCounts
}

// TaskHost is the instance as its deliverer reaches it: reservations and
// releases through the admission, journal lines through the loop, whether
// a deferred request may be replayed, and the [defer] in force. It is
// safe from any goroutine.
type TaskHost struct {
	port  loopPort
	adm   *Admission
	door  Door
	short *atomic.Bool // what the loop last told the door
	pol   *atomic.Pointer[policy.Policy]
}

// Reserve decides req as Admission.Reserve does; quiet journals only a
// granted reservation.
func (h *TaskHost) Reserve(ctx context.Context, req admission.Request, quiet bool) (admission.Decision, error) {
	return h.adm.reserve(ctx, req, quiet)
}

// Release ends a lease (Admission.Release).
func (h *TaskHost) Release(ctx context.Context, lease string) error {
	return h.adm.Release(ctx, lease)
}

// Journal emits ev through the loop, stamped and in order with the loop's
// own events.
func (h *TaskHost) Journal(ctx context.Context, ev api.Event) error {
	_, err := h.port.call(ctx, request{op: opEmit, event: ev})
	return err
}

// Replayable reports whether a deferred request may be replayed now: there
// is a front door, memory is not short (below high, no step pending) and
// the child is ready (the door's health check passed).
func (h *TaskHost) Replayable() bool {
	return h.door != nil && !h.short.Load() && h.door.Ready()
}

// Defer is the [defer] table of the policy in force.
func (h *TaskHost) Defer() policy.Defer { return h.pol.Load().Defer }

// noTasks is the Deliverer of an instance without a deferred-task queue.
type noTasks struct{}

func (noTasks) Run(context.Context)        {}
func (noTasks) Poke()                      {}
func (noTasks) LeaseReleased(string)       {}
func (noTasks) ChildExited()               {}
func (noTasks) TaskCounts() api.TaskCounts { return api.TaskCounts{} }
