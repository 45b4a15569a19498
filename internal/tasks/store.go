package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Errors a store answers with; match them with errors.Is.
var (
	// ErrFull: max_tasks queued and running tasks already; nothing stored.
	ErrFull = errors.New("the deferred-task queue is full")
	// ErrUnknown: no task has this ticket (never stored, dropped, or done
	// and expired).
	ErrUnknown = errors.New("no such task")
	// ErrNotQueued: the task is not queued and due now (leased by someone
	// else, dropped, or backing off).
	ErrNotQueued = errors.New("the task is not queued")
	// ErrNotRunning: the task is not leased (finished already, or its
	// lease expired and it went back to the queue).
	ErrNotRunning = errors.New("the task is not running")
	// ErrNotDead: retry applies to dead tasks only.
	ErrNotDead = errors.New("the task is not dead")
)

// Store keeps deferred tasks durably. Every method that changes a task has
// made the change durable (fsync, or Redis' reply under appendfsync
// always) when it returns nil. Several processes may share one store (the
// instance and `gpuguard tasks`); a lease is taken atomically, so two of
// them never lease one task at once.
//
// A task's life: Enqueue (queued) → Lease (running) → Ack (done, kept
// for keep_results, then Purge removes it) or Fail/Expire/Recover (an
// attempt is counted: queued again, or dead once attempts reach
// maxAttempts). Dead tasks stay until Retry or Drop.
type Store interface {
	// Enqueue stores t (Ticket, Tool, Priority, Bytes, Payload, Enqueued)
	// as queued. A ticket already stored is not stored twice (nil, and
	// the stored task is kept as it is). With maxTasks queued and running
	// tasks already it stores nothing and answers ErrFull.
	Enqueue(ctx context.Context, t api.Task, maxTasks int) error
	// EnqueueBody is Enqueue of t with a body (a deferred request's),
	// which the store reads to its end and writes in chunks as they come
	// (Bodies.Write), never whole in memory: t is stored, durable, only
	// once all of its body is, and Body answers the body until the task
	// is done. An error reading body (wrapping ErrBody), a full queue or a
	// ticket stored already store nothing of it: what was written goes.
	EnqueueBody(ctx context.Context, t api.Task, body io.Reader, maxTasks int) error
	// Peek answers the oldest queued task due at now (by Enqueued), without
	// leasing it; its payload may be left out (Lease answers it). With none due, ok is false and wake is when the next
	// queued task becomes due (zero when none waits).
	Peek(ctx context.Context, now time.Time) (t api.Task, ok bool, wake time.Time, err error)
	// Lease takes ticket (queued and due at now) for delivery: running from
	// now, until Ack, Fail, or Expire once it has been idle (not extended)
	// for the visibility timeout. ErrNotQueued if it is not queued and due.
	Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error)
	// Extend restarts a running task's visibility timeout at now.
	Extend(ctx context.Context, ticket string, now time.Time) error
	// Ack marks a running task done at now; result is kept with it.
	Ack(ctx context.Context, ticket string, result []byte, now time.Time) error
	// AckBody is Ack with a body kept with the result (a replay's
	// response), written as EnqueueBody writes one; the task's request
	// body goes (a done task never runs again). On any error nothing of
	// the body is kept and the task is as it was.
	AckBody(ctx context.Context, ticket string, result []byte, body io.Reader, now time.Time) error
	// RequestBody opens the body EnqueueBody stored, to read a chunk at a
	// time, and answers its length: empty (0) when the task has none (and
	// once it is done: a done task never runs again); ErrUnknown when
	// there is no such task.
	RequestBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error)
	// ResultBody opens the body AckBody stored, as RequestBody does.
	ResultBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error)
	// AckLease is Ack of ticket then, if the ack was made, Peek and Lease
	// of next, in one call: delivery is one task at a time per
	// subscriber, so the done of one task and the lease of the next follow
	// each other, and a store may make both durable in one commit
	// (tasks/sqlite does: one fsync, not a commit each). err is the ack's,
	// as Ack's. next is leased only if it is the task Peek answers at now
	// (the oldest due: a next chosen before another became due, or dropped,
	// is not leased); leased says whether it was, t is then the task as
	// Lease answers it. after is the task Peek would answer after that
	// lease, when the store tells it in the same call (its ticket empty
	// when it does not, or none is due): the next AckLease's next, with no
	// Peek of its own.
	AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (t api.Task, leased bool, after api.Task, err error)
	// Fail counts a failed attempt of a running task: dead once attempts
	// reach maxAttempts, else queued again, due at retryAt.
	Fail(ctx context.Context, ticket, reason string, retryAt time.Time, maxAttempts int) (api.Task, error)
	// Expire counts an attempt of every running task idle for visibility
	// at now (its holder died or hung, on any host) and puts it back, or
	// makes it dead; it answers those tasks as they are now.
	Expire(ctx context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error)
	// Recover does as Expire, at once, for the tasks this store's holder
	// leased before it died (the instance restarted): they were in flight.
	Recover(ctx context.Context, now time.Time, maxAttempts int) ([]api.Task, error)
	// Get answers one task and its result (done tasks).
	Get(ctx context.Context, ticket string) (api.Task, []byte, error)
	// List answers every task, oldest first, without payloads (Get has
	// them): listing a full queue stays small.
	List(ctx context.Context) ([]api.Task, error)
	// Drop deletes a task whatever its state: the only way a task is lost.
	Drop(ctx context.Context, ticket string) (api.Task, error)
	// Retry puts a dead task back in the queue, its attempts reset.
	Retry(ctx context.Context, ticket string, now time.Time) error
	// Counts answers the tasks by state.
	Counts(ctx context.Context) (api.TaskCounts, error)
	// Purge deletes the done tasks finished before before (keep_results).
	Purge(ctx context.Context, before time.Time) (int, error)
	Close() error
}

// NewTicket is an opaque ticket of 128 random bits.
func NewTicket() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on Linux
	return "t-" + hex.EncodeToString(b[:])
}

// Backoff is the wait before a failed task is delivered again: 1 s after
// the first failure, doubling, at most 10 min.
func Backoff(attempts int) time.Duration {
	d := time.Second
	for i := 1; i < attempts && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// MaxBackoff caps Backoff.
const MaxBackoff = 10 * time.Minute

// AckLeaseInTurn is AckLease made of Ack, Peek and Lease in turn, for a
// store with no commit to share between them (each call is durable on its
// own). With tellAfter, one more Peek tells the task due after the one
// leased; without, after is zero and the deliverer peeks itself.
func AckLeaseInTurn(ctx context.Context, s Store, ticket string, result []byte, next string, now time.Time, tellAfter bool) (t api.Task, leased bool, after api.Task, err error) {
	if err := s.Ack(ctx, ticket, result, now); err != nil {
		return api.Task{}, false, api.Task{}, err
	}
	p, ok, _, err := s.Peek(ctx, now)
	if err != nil || !ok || p.Ticket != next {
		return api.Task{}, false, api.Task{}, nil // the ack is made: err is the ack's
	}
	if t, err = s.Lease(ctx, next, now); err != nil {
		return api.Task{}, false, api.Task{}, nil
	}
	if tellAfter {
		after, _, _, _ = s.Peek(ctx, now)
	}
	return t, true, after, nil
}
