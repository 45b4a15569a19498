package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// ToolHTTP is the tool of a task that is a request deferred by the front
// door: gpuguard replays it itself (Replayer), no subscriber is involved.
const ToolHTTP = "http"

// Replayer sends a deferred request's payload to the child and answers
// what to keep as its result; an error (a 5xx, no answer) counts a failed
// attempt. The front door implements it, since it speaks HTTP to the
// child; the supervisor only decides when, so it knows no HTTP. Replay may
// block until ctx ends (ack_timeout).
type Replayer interface {
	Replay(ctx context.Context, payload json.RawMessage) (result []byte, err error)
}

// replaySub marks a flight that the Replayer, not a subscriber, carries.
const replaySub = -1

// DeferRequest stores a request deferred by the front door as a task of
// tool http, durably, before it answers the ticket. It is the door's
// decision (memory is short and the request is P2), so no reservation is
// made; a store that cannot be written (or a full queue) is the error,
// and no ticket is given.
func (q *Tasks) DeferRequest(ctx context.Context, payload json.RawMessage) (string, error) {
	d := q.d
	if d == nil {
		return "", errors.New("this instance has no deferred-task queue")
	}
	t := api.Task{Ticket: newTicket(), Tool: ToolHTTP, Priority: "P2", Payload: payload, Enqueued: time.Now()}
	sctx, cancel := storeContext(ctx)
	defer cancel()
	if err := d.store.Enqueue(sctx, t, q.in.Defer().MaxTasks); err != nil {
		reason := "the deferred request could not be stored: " + err.Error()
		q.logf("%s", reason)
		return "", errors.New(reason)
	}
	d.emit(sctx, api.Event{Event: api.EventDeferred, Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority})
	d.adjust(func(c *api.TaskCounts) { c.Queued++ })
	d.poke()
	return t.Ticket, nil
}

// replayable reports whether a deferred request may be replayed now:
// there is a Replayer, memory is not short (below high, no step pending)
// and the child is ready (the door's health check passed).
func (d *deliverer) replayable() bool {
	return d.replayer != nil && d.in.Replayable()
}

// replay carries f (leased, in flight) through the Replayer on a goroutine
// of its own, so that the deliverer keeps its cadence (ack_timeout, the
// child's exit) while the child answers. Whoever takes f out of flight
// first finishes it: the replay, or pass at the deadline or exit. The end
// of ctx (the supervisor's) ends the replay too.
func (d *deliverer) replay(ctx context.Context, f *taskFlight) {
	rctx, cancel := context.WithDeadline(ctx, f.deadline)
	go func() {
		defer cancel()
		result, err := d.replayer.Replay(rctx, f.task.Payload)
		if !d.takeFlight(f) {
			return // put back already (deadline, exit)
		}
		defer d.poke()
		if err != nil {
			d.requeue(context.Background(), f, "the replay failed: "+err.Error())
			return
		}
		sctx, scancel := storeContext(context.Background())
		defer scancel()
		if err := d.store.Ack(sctx, f.task.Ticket, result, time.Now()); err != nil {
			d.requeue(sctx, f, "the store could not record the response: "+err.Error())
			return
		}
		d.emit(sctx, api.Event{Event: api.EventTaskDone, Ticket: f.task.Ticket, Tool: f.task.Tool, Attempt: f.attempt})
		d.adjust(func(c *api.TaskCounts) { c.Running--; c.Done++ })
	}()
}
