package tasks

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Lazy is a Store opened on first need, and again after every failed
// open: a store that cannot be opened at start (a full disk, a dir that
// cannot be created) never stops an instance, its deferrals are denied
// until it opens. Until a task is enqueued, an embedded store that does
// not exist yet is not created: the calls that only read answer an empty
// queue. Whether it exists is asked once: only an Enqueue through this
// Lazy creates it (an instance's state dir is its own), so an instance
// that never defers anything makes no system call for its queue.
type Lazy struct {
	open   func() (Store, error)
	exists func() bool

	mu     sync.Mutex
	s      Store
	absent bool // exists said no: nothing to read until Enqueue creates it
}

// NewLazy is a Lazy over open; exists says whether the store has ever
// been created (nil: always, as for a server).
func NewLazy(open func() (Store, error), exists func() bool) *Lazy {
	if exists == nil {
		exists = func() bool { return true }
	}
	return &Lazy{open: open, exists: exists}
}

var _ Store = (*Lazy)(nil)

// get answers the store, opening it; nil, nil when create is false and
// it does not exist.
func (l *Lazy) get(create bool) (Store, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s, nil
	}
	if !create && (l.absent || !l.exists()) {
		l.absent = true
		return nil, nil
	}
	s, err := l.open()
	if err != nil {
		return nil, err
	}
	l.s = s
	return s, nil
}

func (l *Lazy) Enqueue(ctx context.Context, t api.Task, maxTasks int) error {
	s, err := l.get(true)
	if err != nil {
		return err
	}
	return s.Enqueue(ctx, t, maxTasks)
}

func (l *Lazy) EnqueueBody(ctx context.Context, t api.Task, body io.Reader, maxTasks int) error {
	s, err := l.get(true)
	if err != nil {
		return err
	}
	return s.EnqueueBody(ctx, t, body, maxTasks)
}

func (l *Lazy) AckBody(ctx context.Context, ticket string, result []byte, body io.Reader, now time.Time) error {
	s, err := l.get(false)
	if s == nil {
		return orErr(err, ErrNotRunning)
	}
	return s.AckBody(ctx, ticket, result, body, now)
}

func (l *Lazy) RequestBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	s, err := l.get(false)
	if s == nil {
		return nil, 0, orErr(err, ErrUnknown)
	}
	return s.RequestBody(ctx, ticket)
}

func (l *Lazy) ResultBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	s, err := l.get(false)
	if s == nil {
		return nil, 0, orErr(err, ErrUnknown)
	}
	return s.ResultBody(ctx, ticket)
}

func (l *Lazy) Peek(ctx context.Context, now time.Time) (api.Task, bool, time.Time, error) {
	s, err := l.get(false)
	if s == nil {
		return api.Task{}, false, time.Time{}, err
	}
	return s.Peek(ctx, now)
}

func (l *Lazy) Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return api.Task{}, orNotQueued(err)
	}
	return s.Lease(ctx, ticket, now)
}

func (l *Lazy) Extend(ctx context.Context, ticket string, now time.Time) error {
	s, err := l.get(false)
	if s == nil {
		return orErr(err, ErrNotRunning)
	}
	return s.Extend(ctx, ticket, now)
}

func (l *Lazy) Ack(ctx context.Context, ticket string, result []byte, now time.Time) error {
	s, err := l.get(false)
	if s == nil {
		return orErr(err, ErrNotRunning)
	}
	return s.Ack(ctx, ticket, result, now)
}

func (l *Lazy) AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (api.Task, bool, api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return api.Task{}, false, api.Task{}, orErr(err, ErrNotRunning)
	}
	return s.AckLease(ctx, ticket, result, next, now)
}

func (l *Lazy) Fail(ctx context.Context, ticket, reason string, retryAt time.Time, maxAttempts int) (api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return api.Task{}, orErr(err, ErrNotRunning)
	}
	return s.Fail(ctx, ticket, reason, retryAt, maxAttempts)
}

func (l *Lazy) Expire(ctx context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return nil, err
	}
	return s.Expire(ctx, now, visibility, maxAttempts)
}

func (l *Lazy) Recover(ctx context.Context, now time.Time, maxAttempts int) ([]api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return nil, err
	}
	return s.Recover(ctx, now, maxAttempts)
}

func (l *Lazy) Get(ctx context.Context, ticket string) (api.Task, []byte, error) {
	s, err := l.get(false)
	if s == nil {
		return api.Task{}, nil, orErr(err, ErrUnknown)
	}
	return s.Get(ctx, ticket)
}

func (l *Lazy) List(ctx context.Context) ([]api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return nil, err
	}
	return s.List(ctx)
}

func (l *Lazy) Drop(ctx context.Context, ticket string) (api.Task, error) {
	s, err := l.get(false)
	if s == nil {
		return api.Task{}, orErr(err, ErrUnknown)
	}
	return s.Drop(ctx, ticket)
}

func (l *Lazy) Retry(ctx context.Context, ticket string, now time.Time) error {
	s, err := l.get(false)
	if s == nil {
		return orErr(err, ErrUnknown)
	}
	return s.Retry(ctx, ticket, now)
}

func (l *Lazy) Counts(ctx context.Context) (api.TaskCounts, error) {
	s, err := l.get(false)
	if s == nil {
		return api.TaskCounts{}, err
	}
	return s.Counts(ctx)
}

func (l *Lazy) Purge(ctx context.Context, before time.Time) (int, error) {
	s, err := l.get(false)
	if s == nil {
		return 0, err
	}
	return s.Purge(ctx, before)
}

// Close closes the store if it was opened.
func (l *Lazy) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil {
		return nil
	}
	err := l.s.Close()
	l.s = nil
	return err
}

func orNotQueued(err error) error { return orErr(err, ErrNotQueued) }

func orErr(err, otherwise error) error {
	if err != nil {
		return err
	}
	return otherwise
}
