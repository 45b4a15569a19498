package deliver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// Store is the deferred-task queue as the deliverer uses it (tasks.Store
// satisfies it; see that package for each method's contract). The
// deliverer decides when a task runs (memory, the window, a subscriber);
// the store decides what is durable.
type Store interface {
	Enqueue(ctx context.Context, t api.Task, maxTasks int) error
	EnqueueBody(ctx context.Context, t api.Task, body io.Reader, maxTasks int) error
	Peek(ctx context.Context, now time.Time) (t api.Task, ok bool, wake time.Time, err error)
	Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error)
	Ack(ctx context.Context, ticket string, result []byte, now time.Time) error
	AckBody(ctx context.Context, ticket string, result []byte, body io.Reader, now time.Time) error
	RequestBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error)
	AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (t api.Task, leased bool, after api.Task, err error)
	Fail(ctx context.Context, ticket, reason string, retryAt time.Time, maxAttempts int) (api.Task, error)
	Expire(ctx context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error)
	Recover(ctx context.Context, now time.Time, maxAttempts int) ([]api.Task, error)
	Counts(ctx context.Context) (api.TaskCounts, error)
	Purge(ctx context.Context, before time.Time) (int, error)
}

// Housekeeping (housekeep) takes back expired leases (another host's, or
// one this deliverer could not put back), removes done tasks past
// keep_results and re-reads the counts, as often as what the queue holds
// asks (housekeepEvery): every taskHousekeeping while tasks are queued or
// running, while the counts are unknown (the store failed), and always on
// a shared store, where other hosts' tasks appear without a word to this
// deliverer; every taskResync while the store only keeps done and dead
// tasks (a done one then goes within taskResync of keep_results, and a
// retry `gpuguard tasks` could not tell the instance of is seen); never
// while a store of its own is empty.
const (
	taskHousekeeping = 5 * time.Second
	taskResync       = time.Minute
)

// storeTimeout bounds one store call: an unreachable Redis answers deny
// rather than holding a deferral.
const storeTimeout = 10 * time.Second

// taskRetry is when delivery is tried again after the store failed.
const taskRetry = time.Second

// deliverer delivers deferred tasks, one at a time, to the subscribers
// that asked for them. It runs on a goroutine of its own: store calls
// (an fsync, a Redis round trip) never hold the supervisor's loop, which
// it asks for reservations and journal lines like any client (in). What
// other goroutines change (subscribers, flights, the slot) is in slot;
// the counts it keeps of the store's tasks are in counts.
type deliverer struct {
	in    Instance
	logf  func(format string, args ...any)
	store Store
	// replayer replays deferred requests (tool http); nil without a door.
	replayer Replayer
	// shared: other processes write the store (a Redis stream that every
	// host of the name shares), so tasks can appear in it unannounced.
	shared bool
	kick   chan struct{}
	// awaitsSample: the last pass left a queued task waiting for memory
	// or for the child, which only a sample can change (Poke).
	awaitsSample atomic.Bool

	slot   *slot
	counts *taskCounts
	// housekept is when the last housekeeping ran; retryAt is when to ask
	// a failing store again, lastErr its last failure (deliverer goroutine).
	housekept time.Time
	retryAt   time.Time
	lastErr   string
}

func newDeliverer(in Instance, o Options) *deliverer {
	d := &deliverer{in: in, logf: o.Logf, store: o.Store, replayer: o.Replayer, shared: o.Shared, kick: make(chan struct{}, 1), slot: &slot{}}
	d.counts = newTaskCounts(d.poke)
	return d
}

// poke asks the deliverer to look again (memory may have freed, a
// subscriber or a task came, a task finished). It never blocks.
func (d *deliverer) poke() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Tasks is the deferred-task API of the control socket (control.Tasks)
// and the front door (frontdoor.Deferrer): storing a deferred task,
// subscribing to deliveries, finishing them. The deliverer does the
// delivering on its goroutine; Tasks is there with or without a store
// (d nil), and then answers as an instance without a queue. The
// supervisor drives it (supervisor.Deliverer: Run, Poke, LeaseReleased,
// ChildExited, TaskCounts; deliverer.go).
type Tasks struct {
	in   Instance   // a task's reservation and its lease, journal lines, the [defer] in force
	d    *deliverer // nil without a store
	logf func(format string, args ...any)
}

// New returns the deferred-task API of the instance in, delivering from
// o.Store (nil: an instance without a queue).
func New(in Instance, o Options) *Tasks {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	q := &Tasks{in: in, logf: o.Logf}
	if o.Store != nil {
		q.d = newDeliverer(in, o)
	}
	return q
}

// TaskCounts are the deferred tasks by state, as last read from the store.
func (q *Tasks) TaskCounts() api.TaskCounts {
	if q.d == nil {
		return api.TaskCounts{}
	}
	c, _ := q.d.counts.load()
	return c
}

// DeferTask is a reservation with a payload: decided as Reserve does, and,
// when the decision is defer, stored as a task before it returns the
// ticket. A task that cannot be stored is answered deny, with the reason,
// and no ticket. Without a store the answer is Reserve's, with no ticket.
func (q *Tasks) DeferTask(ctx context.Context, req admission.Request, payload json.RawMessage) (admission.Decision, string, error) {
	dec, err := q.in.Reserve(ctx, req, false)
	if err != nil || dec.Decision != admission.DecisionDefer || q.d == nil {
		return dec, "", err
	}
	d := q.d
	now := time.Now()
	if req.Priority == "" {
		req.Priority = admission.P1
	}
	t := api.Task{Ticket: newTicket(), Tool: req.Tool, Priority: req.Priority, Bytes: req.Bytes, Payload: payload, Enqueued: now}
	sctx, cancel := storeContext(ctx)
	defer cancel()
	w := d.counts.write()
	if err := d.store.Enqueue(sctx, t, q.in.Defer().MaxTasks); err != nil {
		w.done()
		dec = admission.Decision{Decision: admission.DecisionDeny, Reason: "the deferred task could not be stored: " + err.Error()}
		q.logf("%s", dec.Reason)
		err = q.in.Journal(ctx, api.Event{Event: api.EventAdmission, Decision: dec.Decision,
			Bytes: req.Bytes, Priority: req.Priority, Tool: req.Tool, Reason: dec.Reason})
		return dec, "", err
	}
	w.done(queued)
	d.emit(ctx, api.Event{Event: api.EventDeferred, Ticket: t.Ticket, Tool: t.Tool, Priority: t.Priority, Bytes: t.Bytes})
	d.poke()
	return dec, t.Ticket, nil
}

// storeContext outlives the client's connection (a write that began is
// finished, and its outcome journaled) but not storeTimeout.
func storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
}

// SubscribeTasks registers deliver for task deliveries (a connection's
// `subscribe` with `tasks`). It returns the subscription's id, which done
// and failed name, and cancel, which ends it (the connection closed): a
// task in flight to it goes back to the queue, with an attempt counted.
func (q *Tasks) SubscribeTasks(deliver func(api.TaskDelivery) bool) (int64, func()) {
	d := q.d
	if d == nil {
		return 0, func() {}
	}
	id := d.slot.subscribe(deliver)
	d.poke()
	var once sync.Once
	return id, func() {
		once.Do(func() {
			for _, f := range d.slot.unsubscribe(id) {
				d.requeue(context.Background(), f, "the subscriber's connection closed")
			}
			d.poke()
		})
	}
}

// TaskDone finishes the task delivered on subscription sub: done, and its
// lease released. It returns once the store has recorded it; until then
// (an error) the task is still in flight, and done may be sent again.
func (q *Tasks) TaskDone(ctx context.Context, sub int64, ticket string) error {
	return q.finishTask(ctx, sub, ticket, "", false)
}

// TaskFailed puts the task delivered on sub back with backoff, counting
// an attempt (dead after max_attempts).
func (q *Tasks) TaskFailed(ctx context.Context, sub int64, ticket, reason string) error {
	return q.finishTask(ctx, sub, ticket, reason, true)
}

func (q *Tasks) finishTask(ctx context.Context, sub int64, ticket, reason string, failed bool) error {
	d := q.d
	if d == nil {
		return errors.New("this instance has no deferred-task queue")
	}
	f, c, err := d.slot.finish(sub, ticket, !failed)
	if err != nil {
		return err
	}
	if failed {
		d.requeue(ctx, f, "failed: "+reason)
		d.poke()
		return nil
	}
	sctx, cancel := storeContext(ctx)
	defer cancel()
	now := time.Now()
	// The next task, if one can go now, is leased in the done's commit.
	var next *nextTask
	if c != nil {
		next = d.prepareNext(sctx, c, now)
	}
	var leased, after api.Task
	var ok bool
	w := d.counts.write()
	if next != nil {
		leased, ok, after, err = d.store.AckLease(sctx, ticket, nil, next.task.Ticket, now)
	} else {
		err = d.store.Ack(sctx, ticket, nil, now)
	}
	if err != nil {
		w.done()
		d.slot.putBack(f)
		if c != nil {
			d.finishNext(sctx, next, api.Task{}, false, api.Task{}, now)
		}
		return fmt.Errorf("task %q: the store could not record it done: %w", ticket, err)
	}
	if ok {
		w.done(finished, started)
	} else {
		w.done(finished)
	}
	_ = q.in.Release(sctx, f.lease)
	d.emit(sctx, api.Event{Event: api.EventTaskDone, Ticket: ticket, Tool: f.task.Tool, Attempt: f.attempt()})
	if c != nil {
		d.finishNext(sctx, next, leased, ok, after, now)
	}
	d.poke()
	return nil
}

// requeue counts a failed attempt of f (taken out of flight), releases its
// lease and journals it (and its death after max_attempts).
func (d *deliverer) requeue(ctx context.Context, f *taskFlight, reason string) {
	sctx, cancel := storeContext(ctx)
	defer cancel()
	if f.lease != "" { // a replayed request has none
		_ = d.in.Release(sctx, f.lease) // gone already when the child exited
	}
	pol := d.in.Defer()
	retryAt := time.Now().Add(tasks.Backoff(f.attempt()))
	w := d.counts.write()
	t, err := d.store.Fail(sctx, f.task.Ticket, reason, retryAt, pol.MaxAttempts)
	if err != nil {
		w.done()
		// It stays running in the store: housekeeping (Expire) or the next
		// start (Recover) puts it back.
		d.logf("deferred task %s: %v", f.task.Ticket, err)
		return
	}
	w.done(attempted(t))
	d.journalAttempt(sctx, t)
}

// attempts journals the tasks that the store counted an attempt for in
// the write w (taken back: Recover, Expire), and closes w with their moves.
func (d *deliverer) attempts(ctx context.Context, w countWrite, back []api.Task) {
	moves := make([]func(*api.TaskCounts), 0, len(back))
	for _, t := range back {
		moves = append(moves, attempted(t))
	}
	w.done(moves...)
	for _, t := range back {
		d.journalAttempt(ctx, t)
	}
}

// journalAttempt journals a task that an attempt was counted for.
func (d *deliverer) journalAttempt(ctx context.Context, t api.Task) {
	d.emit(ctx, api.Event{Event: api.EventTaskFailed, Ticket: t.Ticket, Tool: t.Tool, Attempt: t.Attempts, Detail: t.LastError})
	if t.State == api.TaskDead {
		d.logf("deferred task %s (%s) is dead after %d attempts: %s", t.Ticket, t.Tool, t.Attempts, t.LastError)
		d.emit(ctx, api.Event{Event: api.EventTaskDead, Ticket: t.Ticket, Tool: t.Tool, Attempt: t.Attempts, Detail: t.LastError})
	}
}

func (d *deliverer) emit(ctx context.Context, ev api.Event) {
	_ = d.in.Journal(ctx, ev)
}

func newTicket() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
	return "t-" + hex.EncodeToString(b[:])
}

// NoteTask learns of a change `gpuguard tasks` made in the store: a drop
// is journaled (ev), and a task it dropped while in flight here is let go
// with its lease.
func (q *Tasks) NoteTask(ctx context.Context, ev api.Event) error {
	d := q.d
	if d == nil {
		return errors.New("this instance has no deferred-task queue")
	}
	if ev.Event == api.EventTaskDropped {
		for _, f := range d.slot.take(func(f *taskFlight) bool { return f.task.Ticket == ev.Ticket }) {
			if !f.released {
				_ = q.in.Release(ctx, f.lease)
			}
		}
		d.emit(ctx, api.Event{Event: api.EventTaskDropped, Ticket: ev.Ticket, Tool: ev.Tool, Detail: ev.Detail})
	}
	d.counts.refresh(ctx, d.store)
	d.poke()
	return nil
}
