package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// ToolHTTP is the tool of a task that is a request deferred by the front
// door: gpuguard replays it itself (Replayer), no subscriber is involved.
const ToolHTTP = "http"

// Replayer sends a deferred request to the child (its payload, and its
// body of size bytes as the store reads it back) and answers what to keep
// as its result and the answer's body, which the deliverer streams into
// the store and then closes; an error (a 5xx, no answer) counts a failed
// attempt. The front door implements it, since it speaks HTTP to the
// child; the supervisor only decides when, so it knows no HTTP. Replay and
// the answer's reads may block until ctx ends (ack_timeout).
type Replayer interface {
	Replay(ctx context.Context, payload json.RawMessage, body io.Reader, size int64) (result []byte, answer io.ReadCloser, err error)
}

// replaySub marks a flight that the Replayer, not a subscriber, carries.
const replaySub = -1

// DeferRequest stores a request deferred by the front door as a task of
// tool http, with its body, durably, before it answers the ticket. It is
// the door's decision (memory is short and the request is P2), so no
// reservation is made; a store that cannot be written (or a full queue),
// or a body that could not be read, is the error, and no ticket is given.
// The body is written as its client sends it, so the store call is bound
// by the client's request (ctx) and the store's own timeouts, not by
// storeTimeout.
func (q *Tasks) DeferRequest(ctx context.Context, payload json.RawMessage, body io.Reader) (string, error) {
	d := q.d
	if d == nil {
		return "", errors.New("this instance has no deferred-task queue")
	}
	t := api.Task{Ticket: newTicket(), Tool: ToolHTTP, Priority: "P2", Payload: payload, Enqueued: time.Now()}
	w := d.counts.write()
	if err := d.store.EnqueueBody(ctx, t, body, q.in.Defer().MaxTasks); err != nil {
		w.done()
		reason := "the deferred request could not be stored: " + err.Error()
		q.logf("%s", reason)
		return "", errors.New(reason)
	}
	w.done(queued)
	sctx, cancel := storeContext(ctx)
	defer cancel()
	d.emit(sctx, api.Event{Event: api.EventDeferred, Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority})
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
		result, answer, err := d.sendRequest(rctx, f)
		if answer != nil {
			defer answer.Close()
		}
		if !d.slot.storeAnswer(f) {
			return // put back already (deadline, exit)
		}
		defer d.poke()
		defer d.slot.storedAnswer()
		if err != nil {
			d.requeue(context.Background(), f, "the replay failed: "+err.Error())
			return
		}
		// The answer's body goes to the store as the child sends it,
		// bound by the replay's deadline.
		w := d.counts.write()
		if err := d.store.AckBody(rctx, f.task.Ticket, result, answer, time.Now()); err != nil {
			w.done()
			d.requeue(context.Background(), f, "the store could not record the response: "+err.Error())
			return
		}
		w.done(finished)
		sctx, scancel := storeContext(context.Background())
		defer scancel()
		d.emit(sctx, api.Event{Event: api.EventTaskDone, Ticket: f.task.Ticket, Tool: f.task.Tool, Attempt: f.attempt()})
	}()
}

// sendRequest replays f's request, its body read back from the store as
// it is sent; the request body is closed once the answer is, or at once
// on an error.
func (d *deliverer) sendRequest(ctx context.Context, f *taskFlight) ([]byte, io.ReadCloser, error) {
	body, size, err := d.store.RequestBody(ctx, f.task.Ticket)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the request from the store: %w", err)
	}
	result, answer, err := d.replayer.Replay(ctx, f.task.Payload, body, size)
	if err != nil {
		body.Close()
		return nil, nil, err
	}
	return result, closeBoth{answer, body}, nil
}

// closeBoth is an answer that closes its request's body with it.
type closeBoth struct {
	io.ReadCloser
	also io.Closer
}

func (c closeBoth) Close() error {
	err := c.ReadCloser.Close()
	c.also.Close()
	return err
}
