package deliver

import (
	"context"
	"slices"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// nextTask is the task a done leases in its own commit (AckLease), with
// the reservation taken for it and the subscriber it goes to.
type nextTask struct {
	task api.Task
	dec  admission.Decision
	sub  taskSub
}

// readyTask is a task leased by a done, for the deliverer to journal and
// send from its goroutine, as every other delivery, after the done's reply
// is written.
type readyTask struct {
	f   *taskFlight
	sub taskSub
}

// claimNext says whether the done of f may lease the next task itself
// (d.mu held, f taken out of flight): f held the one-at-a-time slot, no
// other task holds it, and a subscriber waits. It then holds the slot
// (d.finishing) until finishNext, so that pass does not lease the same
// task meanwhile; it answers the task told due after the last one (empty:
// none told), which only that holder reads and writes.
func (d *deliverer) claimNext(f *taskFlight) (taskSub, api.Task, bool) {
	if f.released || d.finishing || d.busy() || len(d.subs) == 0 || d.subs[0].deliver == nil {
		return taskSub{}, api.Task{}, false
	}
	d.finishing = true
	after := d.after
	d.after = api.Task{}
	return d.subs[0], after, true
}

// prepareNext finds the task pass would deliver next (told, the store
// checks it is still the oldest due, or peeked) and reserves its memory, as
// pass does; nil when pass must decide (a deferred request, memory short,
// the window closed, the store failing: pass then says so).
func (d *deliverer) prepareNext(ctx context.Context, sub taskSub, told api.Task, now time.Time) *nextTask {
	pol := d.in.Defer()
	if !pol.Window.Open(now) {
		return nil
	}
	t := told
	if t.Ticket == "" {
		var ok bool
		var err error
		if t, ok, _, err = d.store.Peek(ctx, now); err != nil || !ok {
			return nil
		}
	}
	if t.Tool == ToolHTTP {
		return nil
	}
	dec, err := d.in.Reserve(ctx, admission.Request{Bytes: t.Bytes, Priority: t.Priority, Tool: t.Tool, TTL: pol.AckTimeout}, true)
	if err != nil || dec.Decision != admission.DecisionGPU {
		return nil
	}
	return &nextTask{task: t, dec: dec, sub: sub}
}

// finishNext ends what claimNext began: leased is the task AckLease
// leased for next (ok false: none), which becomes the flight in the slot
// and is handed to the deliverer to send, and after the task told due
// after it; without it the reservation goes and pass looks again.
func (d *deliverer) finishNext(ctx context.Context, next *nextTask, leased api.Task, ok bool, after api.Task, now time.Time) {
	if next == nil || !ok {
		if next != nil {
			_ = d.in.Release(ctx, next.dec.Lease)
		}
		d.mu.Lock()
		d.finishing = false
		d.mu.Unlock()
		d.poke()
		return
	}
	f := d.leased(leased, next.dec.Lease, next.sub.id, now.Add(d.in.Defer().AckTimeout))
	d.mu.Lock()
	d.finishing = false
	d.after = after
	boarded := d.boardLocked(f, next.sub)
	if boarded {
		d.ready = append(d.ready, readyTask{f: f, sub: next.sub})
	}
	d.mu.Unlock()
	if !boarded {
		d.requeue(ctx, f, "the subscriber's connection closed")
	}
	d.poke()
}

// leased counts a task just leased as running and makes it a flight for
// subscriber sub, under lease, until deadline (its ack_timeout).
func (d *deliverer) leased(t api.Task, lease string, sub int64, deadline time.Time) *taskFlight {
	d.adjust(func(c *api.TaskCounts) { c.Queued--; c.Running++ })
	return &taskFlight{task: t, attempt: t.Attempts + 1, lease: lease, sub: sub, deadline: deadline}
}

// boardLocked puts f in flight for sub and turns the subscribers, so that
// the next task goes to the next one (d.mu held); false when sub has gone
// meanwhile: f is not in flight, and goes back to the queue.
func (d *deliverer) boardLocked(f *taskFlight, sub taskSub) bool {
	if !slices.ContainsFunc(d.subs, func(s taskSub) bool { return s.id == sub.id }) {
		return false
	}
	d.flights = append(d.flights, f)
	d.subs = append(slices.DeleteFunc(d.subs, func(s taskSub) bool { return s.id == sub.id }), sub)
	return true
}

// sendReady journals and sends the tasks that dones leased, unless they
// left flight meanwhile (their subscriber went, the child exited: they
// were put back).
func (d *deliverer) sendReady(ctx context.Context, now time.Time) {
	d.mu.Lock()
	ready := d.ready
	d.ready = nil
	d.mu.Unlock()
	for _, r := range ready {
		d.mu.Lock()
		in := slices.Contains(d.flights, r.f)
		d.mu.Unlock()
		if in {
			d.send(ctx, r.f, r.sub, now)
		}
	}
}

// send journals the delivery of f and sends it to sub; a task that cannot
// be sent goes back.
func (d *deliverer) send(ctx context.Context, f *taskFlight, sub taskSub, now time.Time) bool {
	t := f.task
	d.emit(ctx, api.Event{Event: api.EventTask, Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority,
		Bytes: t.Bytes, Lease: f.lease, Attempt: f.attempt, WaitSeconds: now.Sub(t.Enqueued).Seconds()})
	ok := sub.deliver(api.TaskDelivery{Type: "task", Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority,
		Bytes: t.Bytes, Payload: payloadOrNull(t.Payload), Lease: f.lease, Attempt: f.attempt})
	if !ok && d.takeFlight(f) {
		d.requeue(ctx, f, "the task could not be sent to the subscriber")
	}
	return ok
}
