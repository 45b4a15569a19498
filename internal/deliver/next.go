package deliver

import (
	"context"
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

// prepareNext finds the task pass would deliver next (told, the store
// checks it is still the oldest due, or peeked) and reserves its memory, as
// pass does; nil when pass must decide (a deferred request, memory short,
// the window closed, the store failing: pass then says so) and when, as
// pass would find, the counts hold no queued task: the done of a queue's
// last task takes no Peek.
func (d *deliverer) prepareNext(ctx context.Context, c *claim, now time.Time) *nextTask {
	pol := d.in.Defer()
	if !pol.Window.Open(now) {
		return nil
	}
	t := c.told
	if t.Ticket == "" {
		if n, known := d.counts.load(); known && n.Queued == 0 {
			return nil
		}
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
	return &nextTask{task: t, dec: dec, sub: c.sub}
}

// finishNext ends a done's claim on the slot (slot.finish): leased is the
// task AckLease leased for next (ok false: none), which becomes the flight
// in the slot and is handed to the deliverer to send, and after the task
// told due after it; without it the reservation goes and pass looks again.
func (d *deliverer) finishNext(ctx context.Context, next *nextTask, leased api.Task, ok bool, after api.Task, now time.Time) {
	if next == nil || !ok {
		if next != nil {
			_ = d.in.Release(ctx, next.dec.Lease)
		}
		d.slot.unclaim()
		d.poke()
		return
	}
	f := d.leased(leased, next.dec.Lease, next.sub.id, now.Add(d.in.Defer().AckTimeout))
	if !d.slot.claimed(f, next.sub, after) {
		d.requeue(ctx, f, "the subscriber's connection closed")
	}
	d.poke()
}

// leased makes a task just leased (and counted running) a flight for
// subscriber sub, under lease, until deadline (its ack_timeout).
func (d *deliverer) leased(t api.Task, lease string, sub int64, deadline time.Time) *taskFlight {
	return &taskFlight{task: t, lease: lease, sub: sub, deadline: deadline}
}

// sendReady journals and sends the tasks that dones leased, unless they
// left flight meanwhile (their subscriber went, the child exited: they
// were put back).
func (d *deliverer) sendReady(ctx context.Context, now time.Time) {
	for _, r := range d.slot.takeReady() {
		if d.slot.holds(r.f) {
			d.send(ctx, r.f, r.sub, now)
		}
	}
}

// send journals the delivery of f and sends it to sub; a task that cannot
// be sent goes back.
func (d *deliverer) send(ctx context.Context, f *taskFlight, sub taskSub, now time.Time) bool {
	t := f.task
	d.emit(ctx, api.Event{Event: api.EventTask, Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority,
		Bytes: t.Bytes, Lease: f.lease, Attempt: f.attempt(), WaitSeconds: now.Sub(t.Enqueued).Seconds()})
	ok := sub.deliver(api.TaskDelivery{Type: "task", Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority,
		Bytes: t.Bytes, Payload: payloadOrNull(t.Payload), Lease: f.lease, Attempt: f.attempt()})
	if !ok && d.slot.takeFlight(f) {
		d.requeue(ctx, f, "the task could not be sent to the subscriber")
	}
	return ok
}
