package deliver

import (
	"context"
	"fmt"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// run delivers tasks until ctx ends (the supervisor stops). A task in
// flight then stays leased in the store: the next start's Recover puts it
// back.
func (d *deliverer) run(ctx context.Context) {
	d.recoverTasks(ctx)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		if wake := d.pass(ctx, time.Now()); !wake.IsZero() {
			t.Reset(time.Until(wake))
		}
		select {
		case <-d.kick:
		case <-t.C:
		case <-ctx.Done():
			return
		}
		t.Stop()
	}
}

// recoverTasks puts back what was in flight when gpuguard last stopped
// (killed included): each counts an attempt.
func (d *deliverer) recoverTasks(ctx context.Context) {
	sctx, cancel := storeContext(ctx)
	defer cancel()
	w := d.counts.write()
	back, err := d.store.Recover(sctx, time.Now(), d.in.Defer().MaxAttempts)
	if err != nil {
		d.logf("deferred tasks: %v", err)
	}
	d.attempts(sctx, w, back)
	d.counts.refresh(sctx, d.store)
	d.housekept = time.Now() // Recover took back every lease
}

// pass does what is due at now and returns when to look again (zero:
// at the next poke). It says whether the next GPU sample should poke it
// (awaitsSample): only when it leaves a queued task waiting for memory or
// for the child. While it looks, a sample pokes anyway, so that one taken
// meanwhile is not missed.
func (d *deliverer) pass(ctx context.Context, now time.Time) time.Time {
	d.awaitsSample.Store(true)
	awaits := false
	defer func() { d.awaitsSample.Store(awaits) }()
	pol := d.in.Defer()
	var wake time.Time
	soonest := func(t time.Time) {
		if !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	sctx, cancel := storeContext(ctx)
	defer cancel()
	d.sendReady(sctx, now)

	back := d.slot.take(func(f *taskFlight) bool { return f.exited || !now.Before(f.deadline) })
	for _, f := range back {
		reason := fmt.Sprintf("not finished within %s (ack_timeout)", pol.AckTimeout)
		if f.exited {
			reason = "the child exited while it ran"
		}
		d.requeue(sctx, f, reason)
	}
	busy, deadline, sub := d.slot.look()
	soonest(deadline)

	if every := d.housekeep(sctx, now, pol.AckTimeout, pol.MaxAttempts, pol.KeepResults); every > 0 {
		soonest(d.housekept.Add(every))
	}
	c, known := d.counts.load()
	queued := c.Queued > 0 || !known
	switch {
	case busy || !queued: // a finished task, or a deferral, pokes
		return wake
	case sub.deliver == nil && !d.replayable():
		// A subscriber pokes as it comes; the child's readiness and
		// memory for a deferred request come with a sample.
		awaits = d.replayer != nil
		return wake
	case !pol.Window.Open(now):
		soonest(pol.Window.NextOpen(now))
		return wake
	}
	if now.Before(d.retryAt) { // the store failed: not at every sample
		soonest(d.retryAt)
		return wake
	}
	t, ok, due, err := d.store.Peek(sctx, now)
	if d.storeErr(err, now) {
		soonest(d.retryAt)
		return wake
	}
	if !ok {
		soonest(due)
		return wake
	}
	// A deferred request waits for memory and the child (the next sample
	// pokes while it waits); any other task for a subscriber (who pokes
	// as it subscribes).
	replay := t.Tool == ToolHTTP
	if replay && !d.replayable() || !replay && sub.deliver == nil {
		awaits = replay
		return wake
	}
	// A deferred request takes no lease: it has no bytes to reserve, and
	// its condition is the door's (memory not short, the child ready).
	var dec admission.Decision
	if !replay {
		var err error
		dec, err = d.in.Reserve(ctx, admission.Request{Bytes: t.Bytes, Priority: t.Priority, Tool: t.Tool, TTL: pol.AckTimeout}, true)
		if err != nil || dec.Decision != admission.DecisionGPU {
			awaits = true // the next sample looks again
			return wake
		}
	}
	w := d.counts.write()
	leased, err := d.store.Lease(sctx, t.Ticket, now)
	if err != nil { // dropped or taken by another host meanwhile, or the store failed
		w.done()
		_ = d.in.Release(sctx, dec.Lease)
		soonest(now.Add(taskRetry))
		return wake
	}
	w.done(started)
	f := d.leased(leased, dec.Lease, sub.id, now.Add(pol.AckTimeout))
	if replay {
		f.sub = replaySub
		d.slot.add(f)
		d.emit(sctx, api.Event{Event: api.EventTask, Ticket: leased.Ticket, Tool: leased.Tool, Priority: leased.Priority,
			Lease: dec.Lease, Attempt: f.attempt(), WaitSeconds: now.Sub(leased.Enqueued).Seconds()})
		d.replay(ctx, f)
		soonest(f.deadline)
		return wake
	}
	if !d.slot.board(f, sub) {
		d.requeue(sctx, f, "the subscriber's connection closed")
		soonest(now)
		return wake
	}
	if !d.send(sctx, f, sub, now) {
		soonest(now)
	}
	soonest(f.deadline)
	return wake
}

func payloadOrNull(p []byte) []byte {
	if len(p) == 0 {
		return []byte("null")
	}
	return p
}

// housekeep takes back expired leases (another host's, on a shared
// store), removes done tasks past keep_results and re-reads the counts,
// each when what the queue holds asks for it and at most as often as
// housekeepEvery says; a re-read of the counts that was owed comes first.
// It answers how long the next may wait after it (0: until something
// changes).
func (d *deliverer) housekeep(ctx context.Context, now time.Time, ack time.Duration, maxAttempts int, keep time.Duration) time.Duration {
	if d.counts.isOwed() {
		d.counts.refresh(ctx, d.store)
	}
	c, known := d.counts.load()
	every := d.housekeepEvery(c, known)
	switch {
	case every == 0:
		d.housekept = time.Time{} // the clock stops
		return 0
	case d.housekept.IsZero():
		// The queue just got its first task: its counts are this
		// deliverer's own, and nothing is there to expire or purge yet.
		d.housekept = now
		return every
	case now.Sub(d.housekept) < every:
		return every
	}
	d.housekept = now
	if c.Running > 0 || !known {
		w := d.counts.write()
		back, err := d.store.Expire(ctx, now, ack, maxAttempts)
		d.storeErr(err, now)
		d.attempts(ctx, w, back)
	}
	if c.Done > 0 || !known {
		if _, err := d.store.Purge(ctx, now.Add(-keep)); err != nil {
			d.storeErr(err, now)
		}
	}
	d.counts.refresh(ctx, d.store)
	return d.housekeepEvery(d.counts.load())
}

// housekeepEvery is how long housekeeping may wait, given the counts c
// (known: read from the store, which has not failed since): see
// taskHousekeeping. 0: no housekeeping until something changes (a
// deferral, a delivery, `gpuguard tasks`), each of which moves the
// counts itself.
func (d *deliverer) housekeepEvery(c api.TaskCounts, known bool) time.Duration {
	switch {
	case d.shared || !known || c.Pending() > 0:
		return taskHousekeeping
	case c != (api.TaskCounts{}):
		return taskResync
	}
	return 0
}

// storeErr notes the outcome of a store call that the deliverer makes on
// its own: a failure is logged when it differs from the last one (a Redis
// that is down fails every call the same way), and delivery waits
// taskRetry before it asks again; a success after failures is logged once.
// It reports whether err is a failure.
func (d *deliverer) storeErr(err error, now time.Time) bool {
	if err == nil {
		if d.lastErr != "" {
			d.logf("deferred tasks: the store answers again")
			d.lastErr = ""
		}
		return false
	}
	if msg := err.Error(); msg != d.lastErr {
		d.logf("deferred tasks: %s (retrying every %s)", msg, taskRetry)
		d.lastErr = msg
	}
	d.retryAt = now.Add(taskRetry)
	return true
}
