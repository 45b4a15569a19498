// Package memstore is a tasks.Store in memory: nothing survives the
// process, so gpuguard never uses it for users' tasks. It passes the
// conformance suite like the durable stores (a "restart" is a new handle
// on the same memory), so tests of the supervisor can run on it inside a
// synctest bubble, where a database's own goroutines and files would not
// belong. Fail makes every call fail, as a full disk would.
package memstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// Memory is the shared state; Open hands out stores on it.
type Memory struct {
	mu      sync.Mutex
	tasks   map[string]*entry
	seq     int
	failing error
}

type entry struct {
	t        api.Task
	seq      int
	leasedAt time.Time
	result   []byte
	// body and resultBody are the task's bodies (RequestBody and
	// ResultBody): in memory whole, as everything here is.
	body, resultBody []byte
}

// New returns an empty memory.
func New() *Memory { return &Memory{tasks: map[string]*entry{}} }

// Open is a store on m.
func (m *Memory) Open() tasks.Store { return &store{m: m} }

// Fail makes every call fail with err (nil: work again).
func (m *Memory) Fail(err error) {
	m.mu.Lock()
	m.failing = err
	m.mu.Unlock()
}

type store struct{ m *Memory }

func (s *store) lock() (*Memory, error) {
	s.m.mu.Lock()
	if s.m.failing != nil {
		s.m.mu.Unlock()
		return nil, s.m.failing
	}
	return s.m, nil
}

func (s *store) Close() error { return nil }

// pending counts the tasks queued or running.
func pending(m *Memory) int {
	n := 0
	for _, e := range m.tasks {
		if e.t.State == api.TaskQueued || e.t.State == api.TaskRunning {
			n++
		}
	}
	return n
}

func (s *store) Enqueue(ctx context.Context, t api.Task, maxTasks int) error {
	return s.enqueue(t, nil, maxTasks)
}

// EnqueueBody reads body whole first: a failed read stores nothing.
func (s *store) EnqueueBody(_ context.Context, t api.Task, body io.Reader, maxTasks int) error {
	b, err := readBody(body)
	if err != nil {
		return fmt.Errorf("storing task %s: %w", t.Ticket, err)
	}
	return s.enqueue(t, b, maxTasks)
}

// readBody reads body whole, a read error wrapped with ErrBody as every
// store wraps it.
func readBody(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", tasks.ErrBody, err)
	}
	return b, nil
}

func (s *store) enqueue(t api.Task, body []byte, maxTasks int) error {
	m, err := s.lock()
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.tasks[t.Ticket]; ok {
		return nil
	}
	if pending(m) >= maxTasks {
		return fmt.Errorf("%w (max_tasks %d)", tasks.ErrFull, maxTasks)
	}
	m.seq++
	t.State, t.Attempts, t.LastError, t.NotBefore, t.Finished = api.TaskQueued, 0, "", time.Time{}, time.Time{}
	t.Payload = slices.Clone(t.Payload)
	m.tasks[t.Ticket] = &entry{t: t, seq: m.seq, body: body}
	return nil
}

// sorted is the entries oldest first.
func sorted(m *Memory) []*entry {
	out := make([]*entry, 0, len(m.tasks))
	for _, e := range m.tasks {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int {
		if c := a.t.Enqueued.Compare(b.t.Enqueued); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	return out
}

func (s *store) Peek(_ context.Context, now time.Time) (api.Task, bool, time.Time, error) {
	m, err := s.lock()
	if err != nil {
		return api.Task{}, false, time.Time{}, err
	}
	defer m.mu.Unlock()
	var wake time.Time
	for _, e := range sorted(m) {
		if e.t.State != api.TaskQueued {
			continue
		}
		if !e.t.NotBefore.After(now) {
			return e.t, true, time.Time{}, nil
		}
		if wake.IsZero() || e.t.NotBefore.Before(wake) {
			wake = e.t.NotBefore
		}
	}
	return api.Task{}, false, wake, nil
}

func (s *store) Lease(_ context.Context, ticket string, now time.Time) (api.Task, error) {
	m, err := s.lock()
	if err != nil {
		return api.Task{}, err
	}
	defer m.mu.Unlock()
	e, ok := m.tasks[ticket]
	if !ok || e.t.State != api.TaskQueued || e.t.NotBefore.After(now) {
		return api.Task{}, fmt.Errorf("leasing task %s: %w", ticket, tasks.ErrNotQueued)
	}
	e.t.State, e.leasedAt = api.TaskRunning, now
	return e.t, nil
}

func (s *store) running(ticket string, f func(e *entry)) error {
	m, err := s.lock()
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	e, ok := m.tasks[ticket]
	if !ok || e.t.State != api.TaskRunning {
		return fmt.Errorf("task %s: %w", ticket, tasks.ErrNotRunning)
	}
	f(e)
	return nil
}

func (s *store) Extend(_ context.Context, ticket string, now time.Time) error {
	return s.running(ticket, func(e *entry) { e.leasedAt = now })
}

func (s *store) Ack(_ context.Context, ticket string, result []byte, now time.Time) error {
	return s.ack(ticket, result, nil, now)
}

func (s *store) AckBody(_ context.Context, ticket string, result []byte, body io.Reader, now time.Time) error {
	b, err := readBody(body)
	if err != nil {
		return fmt.Errorf("finishing task %s: %w", ticket, err)
	}
	return s.ack(ticket, result, b, now)
}

// ack marks a running task done with result and resultBody; its request
// body goes (a done task never runs again).
func (s *store) ack(ticket string, result, resultBody []byte, now time.Time) error {
	return s.running(ticket, func(e *entry) {
		e.t.State, e.t.Finished, e.result = api.TaskDone, now, slices.Clone(result)
		e.resultBody, e.body = resultBody, nil
	})
}

func (s *store) RequestBody(_ context.Context, ticket string) (io.ReadCloser, int64, error) {
	return s.body(ticket, false)
}

func (s *store) ResultBody(_ context.Context, ticket string) (io.ReadCloser, int64, error) {
	return s.body(ticket, true)
}

func (s *store) body(ticket string, result bool) (io.ReadCloser, int64, error) {
	m, err := s.lock()
	if err != nil {
		return nil, 0, err
	}
	defer m.mu.Unlock()
	e, ok := m.tasks[ticket]
	if !ok {
		return nil, 0, fmt.Errorf("task %s: %w", ticket, tasks.ErrUnknown)
	}
	b := e.body
	if result {
		b = e.resultBody
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// AckLease is Ack, Peek, Lease and Peek again (after); memory has no
// commit to share.
func (s *store) AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (api.Task, bool, api.Task, error) {
	return tasks.AckLeaseInTurn(ctx, s, ticket, result, next, now, true)
}

func attempt(e *entry, reason string, retry time.Time, max int) api.Task {
	e.t.Attempts++
	e.t.LastError = reason
	if e.t.Attempts >= max {
		e.t.State, e.t.NotBefore = api.TaskDead, time.Time{}
	} else {
		e.t.State, e.t.NotBefore = api.TaskQueued, retry
	}
	return e.t
}

func (s *store) Fail(_ context.Context, ticket, reason string, retryAt time.Time, maxAttempts int) (api.Task, error) {
	var t api.Task
	err := s.running(ticket, func(e *entry) { t = attempt(e, reason, retryAt, maxAttempts) })
	return t, err
}

func (s *store) Expire(_ context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error) {
	return s.putBack(func(e *entry) bool { return !e.leasedAt.After(now.Add(-visibility)) },
		fmt.Sprintf("not finished within %s (ack_timeout)", visibility), maxAttempts)
}

func (s *store) Recover(_ context.Context, _ time.Time, maxAttempts int) ([]api.Task, error) {
	return s.putBack(func(*entry) bool { return true }, "in flight when gpuguard stopped", maxAttempts)
}

func (s *store) putBack(due func(*entry) bool, reason string, max int) ([]api.Task, error) {
	m, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []api.Task
	for _, e := range sorted(m) {
		if e.t.State == api.TaskRunning && due(e) {
			out = append(out, attempt(e, reason, time.Time{}, max))
		}
	}
	return out, nil
}

func (s *store) Get(_ context.Context, ticket string) (api.Task, []byte, error) {
	m, err := s.lock()
	if err != nil {
		return api.Task{}, nil, err
	}
	defer m.mu.Unlock()
	e, ok := m.tasks[ticket]
	if !ok {
		return api.Task{}, nil, fmt.Errorf("task %s: %w", ticket, tasks.ErrUnknown)
	}
	return e.t, e.result, nil
}

func (s *store) List(_ context.Context) ([]api.Task, error) {
	m, err := s.lock()
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []api.Task
	for _, e := range sorted(m) {
		t := e.t
		t.Payload = nil
		out = append(out, t)
	}
	return out, nil
}

func (s *store) Drop(_ context.Context, ticket string) (api.Task, error) {
	m, err := s.lock()
	if err != nil {
		return api.Task{}, err
	}
	defer m.mu.Unlock()
	e, ok := m.tasks[ticket]
	if !ok {
		return api.Task{}, fmt.Errorf("dropping task %s: %w", ticket, tasks.ErrUnknown)
	}
	delete(m.tasks, ticket)
	return e.t, nil
}

func (s *store) Retry(_ context.Context, ticket string, _ time.Time) error {
	m, err := s.lock()
	if err != nil {
		return err
	}
	defer m.mu.Unlock()
	e, ok := m.tasks[ticket]
	switch {
	case !ok:
		return fmt.Errorf("retrying: task %s: %w", ticket, tasks.ErrUnknown)
	case e.t.State != api.TaskDead:
		return fmt.Errorf("retrying task %s: %w", ticket, tasks.ErrNotDead)
	}
	e.t.State, e.t.Attempts, e.t.NotBefore = api.TaskQueued, 0, time.Time{}
	return nil
}

func (s *store) Counts(_ context.Context) (api.TaskCounts, error) {
	m, err := s.lock()
	if err != nil {
		return api.TaskCounts{}, err
	}
	defer m.mu.Unlock()
	var c api.TaskCounts
	for _, e := range m.tasks {
		switch e.t.State {
		case api.TaskQueued:
			c.Queued++
		case api.TaskRunning:
			c.Running++
		case api.TaskDone:
			c.Done++
		case api.TaskDead:
			c.Dead++
		}
	}
	return c, nil
}

func (s *store) Purge(_ context.Context, before time.Time) (int, error) {
	m, err := s.lock()
	if err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	n := 0
	for k, e := range m.tasks {
		if e.t.State == api.TaskDone && e.t.Finished.Before(before) {
			delete(m.tasks, k)
			n++
		}
	}
	return n, nil
}

// ErrFailing is a ready error for Fail: what a full disk answers.
var ErrFailing = errors.New("no space left on device")
