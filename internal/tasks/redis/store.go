package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// quiet drops go-redis' own log lines (a failed dial is logged by the
// pool at every attempt): gpuguard reports a store's errors itself, once
// per change, and a Redis that is down would otherwise fill stderr.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Silence routes go-redis' process-wide logger nowhere; the command that
// opens a store calls it once (it is a global of go-redis).
func Silence() { goredis.SetLogger(quiet{}) }

// Key is the stream of an instance name's tasks.
func Key(name string) string { return "gpuguard:tasks:" + name }

// Timeouts: an unreachable Redis must answer a deferral (deny) quickly,
// never hold it for go-redis' default retries.
const (
	dialTimeout = 2 * time.Second
	ioTimeout   = 3 * time.Second
)

// Store is the Redis store. It is safe for concurrent use.
type Store struct {
	c        *goredis.Client
	key      string
	consumer string
	bodies   bodies
}

var _ tasks.Store = (*Store)(nil)

// Open connects to url (redis://[:PASSWORD@]HOST:PORT/DB) for the tasks
// of name. consumer names this holder in the consumer group; it must be
// the same across restarts of one instance (Recover finds its tasks by
// it) and differ between instances. Open does not dial: an unreachable
// Redis shows in the first call's error, so an instance starts anyway.
func Open(url, name, consumer string) (*Store, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("[defer] store: %w", err)
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = dialTimeout, ioTimeout, ioTimeout
	opt.MaxRetries = 1
	c := goredis.NewClient(opt)
	return &Store{c: c, key: Key(name), consumer: consumer, bodies: bodies{c: c, prefix: Key(name) + ":body:"}}, nil
}

// Close closes the connections.
func (s *Store) Close() error { return s.c.Close() }

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromMicros(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMicro(n)
}

// taskOf reads a task hash as HGETALL returns it in a script's reply.
func taskOf(ticket string, v any) (api.Task, []byte) {
	flat, _ := v.([]any)
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		val, _ := flat[i+1].(string)
		m[k] = val
	}
	return fromMap(ticket, m)
}

func fromMap(ticket string, m map[string]string) (api.Task, []byte) {
	bytes, _ := strconv.ParseUint(m["bytes"], 10, 64)
	attempts, _ := strconv.Atoi(m["attempts"])
	if ticket == "" {
		ticket = m["ticket"]
	}
	t := api.Task{Ticket: ticket, Tool: m["tool"], Priority: m["priority"], Bytes: bytes, State: m["state"],
		Attempts: attempts, LastError: m["last_error"], Enqueued: fromMicros(m["enqueued"]),
		NotBefore: fromMicros(m["not_before"]), Finished: fromMicros(m["finished"])}
	if p := m["payload"]; p != "" {
		t.Payload = []byte(p)
	}
	var result []byte
	if r, ok := m["result"]; ok {
		result = []byte(r)
	}
	return t, result
}

func (s *Store) run(ctx context.Context, sc *goredis.Script, args ...any) (any, error) {
	v, err := sc.Run(ctx, s.c, []string{s.key}, args...).Result()
	if errors.Is(err, goredis.Nil) {
		return nil, nil
	}
	return v, err
}

// Enqueue stores t; see tasks.Store.
func (s *Store) Enqueue(ctx context.Context, t api.Task, maxTasks int) error {
	return s.enqueue(ctx, t, "", 0, maxTasks)
}

// enqueue stores t naming the body written as bodyID ("" for none).
func (s *Store) enqueue(ctx context.Context, t api.Task, bodyID string, size int64, maxTasks int) error {
	v, err := s.run(ctx, enqueueScript, t.Ticket, t.Tool, t.Priority, t.Bytes, string(t.Payload), micros(t.Enqueued), maxTasks, bodyID, size)
	if err != nil {
		return fmt.Errorf("storing task %s in redis: %w", t.Ticket, err)
	}
	if n, _ := v.(int64); n == 0 {
		return fmt.Errorf("%w (max_tasks %d)", tasks.ErrFull, maxTasks)
	}
	return nil
}

// Peek answers the oldest due task.
func (s *Store) Peek(ctx context.Context, now time.Time) (api.Task, bool, time.Time, error) {
	v, err := s.run(ctx, peekScript, micros(now))
	if err != nil {
		return api.Task{}, false, time.Time{}, fmt.Errorf("reading the task queue in redis: %w", err)
	}
	r, _ := v.([]any)
	if len(r) != 2 {
		return api.Task{}, false, time.Time{}, errors.New("reading the task queue in redis: unexpected reply")
	}
	if n, _ := r[0].(int64); n == 1 {
		t, _ := taskOf("", r[1])
		return t, true, time.Time{}, nil
	}
	w, _ := r[1].(string)
	return api.Task{}, false, fromMicros(w), nil
}

// Lease takes ticket for delivery.
func (s *Store) Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error) {
	v, err := s.run(ctx, leaseScript, ticket, micros(now), s.consumer)
	if err != nil {
		return api.Task{}, fmt.Errorf("leasing task %s in redis: %w", ticket, err)
	}
	if v == nil {
		return api.Task{}, fmt.Errorf("leasing task %s: %w", ticket, tasks.ErrNotQueued)
	}
	t, _ := taskOf(ticket, v)
	return t, nil
}

// Extend restarts the visibility timeout (and claims the entry back).
func (s *Store) Extend(ctx context.Context, ticket string, now time.Time) error {
	return s.running(ctx, ticket, "extending", extendScript, ticket, micros(now), s.consumer)
}

// Ack marks the task done.
func (s *Store) Ack(ctx context.Context, ticket string, result []byte, now time.Time) error {
	return s.running(ctx, ticket, "finishing", ackScript, ticket, string(result), micros(now), "", 0)
}

// AckLease is Ack, Peek and Lease: three scripts, each durable on its own
// (appendfsync always), as the calls alone would be; it does not tell
// after (a Peek more per task would cost a round trip that the deliverer's
// own Peek costs anyway).
func (s *Store) AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (api.Task, bool, api.Task, error) {
	return tasks.AckLeaseInTurn(ctx, s, ticket, result, next, now, false)
}

func (s *Store) running(ctx context.Context, ticket, what string, sc *goredis.Script, args ...any) error {
	v, err := s.run(ctx, sc, args...)
	if err != nil {
		return fmt.Errorf("%s task %s in redis: %w", what, ticket, err)
	}
	if n, _ := v.(int64); n == 0 {
		return fmt.Errorf("%s task %s: %w", what, ticket, tasks.ErrNotRunning)
	}
	return nil
}

// Fail counts a failed attempt.
func (s *Store) Fail(ctx context.Context, ticket, reason string, retryAt time.Time, maxAttempts int) (api.Task, error) {
	v, err := s.run(ctx, failScript, ticket, reason, micros(retryAt), maxAttempts)
	if err != nil {
		return api.Task{}, fmt.Errorf("failing task %s in redis: %w", ticket, err)
	}
	if v == nil {
		return api.Task{}, fmt.Errorf("failing task %s: %w", ticket, tasks.ErrNotRunning)
	}
	t, _ := taskOf(ticket, v)
	return t, nil
}

// Expire takes over, with XAUTOCLAIM, the entries idle for visibility on
// any host, and puts back those whose lease ended by now. The idle time
// Redis measures runs on its clock; now may be ahead of the wall clock
// (tests), by which much less idle time is asked for.
func (s *Store) Expire(ctx context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error) {
	minIdle := max(0, visibility-now.Sub(time.Now()))
	reason := fmt.Sprintf("not finished within %s (ack_timeout)", visibility)
	v, err := s.run(ctx, expireScript, micros(now), visibility.Microseconds(), minIdle.Milliseconds(), s.consumer, maxAttempts, reason)
	if err != nil {
		return nil, fmt.Errorf("expiring tasks in redis: %w", err)
	}
	return tasksOf(v), nil
}

// Recover puts back the tasks this consumer held when it died.
func (s *Store) Recover(ctx context.Context, now time.Time, maxAttempts int) ([]api.Task, error) {
	v, err := s.run(ctx, recoverScript, s.consumer, maxAttempts, "in flight when gpuguard stopped")
	if err != nil {
		return nil, fmt.Errorf("recovering tasks in redis: %w", err)
	}
	return tasksOf(v), nil
}

func tasksOf(v any) []api.Task {
	list, _ := v.([]any)
	var out []api.Task
	for _, h := range list {
		t, _ := taskOf("", h)
		out = append(out, t)
	}
	return out
}

// Get reads one task and its result.
func (s *Store) Get(ctx context.Context, ticket string) (api.Task, []byte, error) {
	m, err := s.c.HGetAll(ctx, s.key+":task:"+ticket).Result()
	if err != nil {
		return api.Task{}, nil, fmt.Errorf("reading task %s in redis: %w", ticket, err)
	}
	if len(m) == 0 {
		return api.Task{}, nil, fmt.Errorf("task %s: %w", ticket, tasks.ErrUnknown)
	}
	t, result := fromMap(ticket, m)
	return t, result, nil
}

// listFields are the hash fields List reads (not the result).
var listFields = []string{"tool", "priority", "bytes", "state", "attempts", "last_error", "enqueued", "not_before", "finished"}

// List reads every task, oldest first, in pipelined batches.
func (s *Store) List(ctx context.Context) ([]api.Task, error) {
	tickets, err := s.c.ZRange(ctx, s.key+":all", 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("listing tasks in redis: %w", err)
	}
	out := make([]api.Task, 0, len(tickets))
	const batch = 1000
	for i := 0; i < len(tickets); i += batch {
		part := tickets[i:min(i+batch, len(tickets))]
		cmds := make([]*goredis.SliceCmd, len(part))
		_, err := s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for j, t := range part {
				cmds[j] = p.HMGet(ctx, s.key+":task:"+t, listFields...)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing tasks in redis: %w", err)
		}
		for j, c := range cmds {
			vals := c.Val()
			m := map[string]string{}
			for k, name := range listFields {
				if k < len(vals) {
					m[name], _ = vals[k].(string)
				}
			}
			if m["state"] == "" {
				continue // dropped while listing
			}
			t, _ := fromMap(part[j], m)
			out = append(out, t)
		}
	}
	return out, nil
}

// Drop deletes a task.
func (s *Store) Drop(ctx context.Context, ticket string) (api.Task, error) {
	v, err := s.run(ctx, dropScript, ticket)
	if err != nil {
		return api.Task{}, fmt.Errorf("dropping task %s in redis: %w", ticket, err)
	}
	if v == nil {
		return api.Task{}, fmt.Errorf("dropping task %s: %w", ticket, tasks.ErrUnknown)
	}
	t, _ := taskOf(ticket, v)
	return t, nil
}

// Retry puts a dead task back.
func (s *Store) Retry(ctx context.Context, ticket string, now time.Time) error {
	v, err := s.run(ctx, retryScript, ticket)
	if err != nil {
		return fmt.Errorf("retrying task %s in redis: %w", ticket, err)
	}
	switch n, _ := v.(int64); n {
	case 1:
		return nil
	case 0:
		return fmt.Errorf("retrying task %s: %w", ticket, tasks.ErrNotDead)
	default:
		return fmt.Errorf("retrying: task %s: %w", ticket, tasks.ErrUnknown)
	}
}

// Counts reads the counters the scripts keep.
func (s *Store) Counts(ctx context.Context) (api.TaskCounts, error) {
	m, err := s.c.HGetAll(ctx, s.key+":counts").Result()
	if err != nil {
		return api.TaskCounts{}, fmt.Errorf("counting tasks in redis: %w", err)
	}
	n := func(k string) int { v, _ := strconv.Atoi(m[k]); return v }
	return api.TaskCounts{Queued: n("queued"), Running: n("running"), Done: n("done"), Dead: n("dead")}, nil
}

// Purge deletes done tasks finished before before.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	v, err := s.run(ctx, purgeScript, micros(before))
	if err != nil {
		return 0, fmt.Errorf("purging done tasks in redis: %w", err)
	}
	n, _ := v.(int64)
	return int(n), nil
}
