package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// Dir is the store's directory in a state dir, and File its database.
const (
	Dir  = "deferred"
	File = "tasks.db"
)

// busyTimeout is how long a write waits for another process's write
// transaction (the instance and `gpuguard tasks` share the file).
const busyTimeout = 5 * time.Second

const schema = `
CREATE TABLE IF NOT EXISTS tasks (
	ticket     TEXT PRIMARY KEY,
	tool       TEXT NOT NULL,
	priority   TEXT NOT NULL,
	bytes      INTEGER NOT NULL,
	payload    BLOB,
	state      TEXT NOT NULL,
	attempts   INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	enqueued   INTEGER NOT NULL,
	not_before INTEGER NOT NULL DEFAULT 0,
	leased_at  INTEGER NOT NULL DEFAULT 0,
	finished   INTEGER NOT NULL DEFAULT 0,
	result     BLOB,
	body       TEXT NOT NULL DEFAULT '',
	result_body TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tasks_by_state ON tasks(state, enqueued);
CREATE INDEX IF NOT EXISTS tasks_by_age ON tasks(enqueued);
` + bodiesSchema

// cols are the columns a Task is read from, in scan order.
const cols = `ticket, tool, priority, bytes, payload, state, attempts, last_error, enqueued, not_before, finished`

// listCols are cols without the payload (NULL in its place).
const listCols = `ticket, tool, priority, bytes, NULL, state, attempts, last_error, enqueued, not_before, finished`

// listQuery selects every task without its payload, oldest first.
const listQuery = `SELECT ` + listCols + ` FROM tasks ORDER BY enqueued, rowid`

// Store is the SQLite store. It is safe for concurrent use. Its one
// connection, with the write discipline and the prepared statements, is
// conn (conn.go); the tasks' bodies are chunks (body.go).
type Store struct {
	c      *conn
	chunks chunks
}

var _ tasks.Store = (*Store)(nil)

// Open opens (creating if needed) the store in stateDir/deferred/. The
// directory is created 0700 and the database 0600: payloads are the
// user's data.
func Open(stateDir string) (*Store, error) {
	dir := filepath.Join(stateDir, Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the task store's dir: %w", err)
	}
	return OpenFile(filepath.Join(dir, File))
}

// OpenFile opens (creating if needed) the store in the database file path.
func OpenFile(path string) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the task store: %w", err)
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening the task store %s: %w", path, err)
	}
	// One connection: this process's writes are serialised here rather
	// than by SQLITE_BUSY retries, and the pragmas hold for it.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("preparing the task store %s: %w", path, err)
	}
	if err := addBodyColumns(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("preparing the task store %s: %w", path, err)
	}
	s := &Store{c: &conn{db: db}}
	s.chunks.c = s.c
	if err := s.c.prepare(); err != nil {
		db.Close()
		return nil, fmt.Errorf("preparing the task store %s: %w", path, err)
	}
	return s, nil
}

// Close closes the statements and the database.
func (s *Store) Close() error { return s.c.close() }

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

type scanner interface{ Scan(dest ...any) error }

// around scans before, the columns its caller asks for, then after.
type around struct {
	r             scanner
	before, after []any
}

func (a around) Scan(dest ...any) error {
	return a.r.Scan(append(append(append([]any(nil), a.before...), dest...), a.after...)...)
}

func scanTask(r scanner) (api.Task, error) {
	var t api.Task
	var payload []byte
	var enq, nb, fin int64
	if err := r.Scan(&t.Ticket, &t.Tool, &t.Priority, &t.Bytes, &payload, &t.State, &t.Attempts, &t.LastError, &enq, &nb, &fin); err != nil {
		return t, err
	}
	if len(payload) > 0 {
		t.Payload = payload
	}
	t.Enqueued, t.NotBefore, t.Finished = fromNanos(enq), fromNanos(nb), fromNanos(fin)
	return t, nil
}

// Enqueue stores t as queued, unless its ticket is stored already or the
// queue holds maxTasks pending tasks (one statement: the count and the
// insert cannot be split by another process's).
func (s *Store) Enqueue(ctx context.Context, t api.Task, maxTasks int) error {
	_, err := s.enqueue(ctx, t, "", maxTasks)
	return err
}

// enqueue stores t with the body written as bodyID ("" for none);
// stored says whether this call stored it (not a ticket stored before).
func (s *Store) enqueue(ctx context.Context, t api.Task, bodyID string, maxTasks int) (stored bool, err error) {
	if err := s.c.write(ctx); err != nil {
		return false, fmt.Errorf("storing task %s: %w", t.Ticket, err)
	}
	res, err := s.c.st.enqueue.ExecContext(uncancelled(ctx), t.Ticket, t.Tool, t.Priority, t.Bytes, []byte(t.Payload), nanos(t.Enqueued), maxTasks, bodyID)
	s.c.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("storing task %s: %w", t.Ticket, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return true, nil
	}
	var one int
	switch err := s.c.st.exists.QueryRowContext(ctx, t.Ticket).Scan(&one); {
	case err == nil:
		return false, nil // stored before: enqueue is idempotent
	case errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("%w (max_tasks %d)", tasks.ErrFull, maxTasks)
	default:
		return false, fmt.Errorf("storing task %s: %w", t.Ticket, err)
	}
}

const enqueueQuery = `INSERT INTO tasks (ticket, tool, priority, bytes, payload, state, enqueued, body)
	SELECT ?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?8
	WHERE (SELECT count(*) FROM tasks WHERE state IN ('queued', 'running')) < ?7
	ON CONFLICT (ticket) DO NOTHING`

// Peek reads the oldest due queued task, without its payload (the lease
// reads it: not twice per task), or when the next one is due.
func (s *Store) Peek(ctx context.Context, now time.Time) (api.Task, bool, time.Time, error) {
	t, err := scanTask(s.c.st.peek.QueryRowContext(ctx, now.UnixNano()))
	if err == nil {
		return t, true, time.Time{}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return t, false, time.Time{}, fmt.Errorf("reading the task queue: %w", err)
	}
	var wake sql.NullInt64
	if err := s.c.st.peekWake.QueryRowContext(ctx).Scan(&wake); err != nil {
		return api.Task{}, false, time.Time{}, fmt.Errorf("reading the task queue: %w", err)
	}
	return api.Task{}, false, fromNanos(wake.Int64), nil
}

// Lease takes ticket in one UPDATE ... RETURNING. It is the one write
// that is not fsynced on its own (synchronous=NORMAL for it): a lease lost
// to a crash leaves the task queued, which is what Recover would make of
// it anyway, and the next fsynced commit (the task's done, or any other)
// makes it durable, since a WAL is written in order. That halves the
// fsyncs per task delivered.
func (s *Store) Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error) {
	if err := s.c.write(ctx); err != nil {
		return api.Task{}, fmt.Errorf("leasing task %s: %w", ticket, err)
	}
	defer s.c.mu.Unlock()
	var t api.Task
	err := s.c.unfsynced(ctx, func() (err error) {
		t, err = scanTask(s.c.st.lease.QueryRowContext(uncancelled(ctx), now.UnixNano(), ticket, now.UnixNano()))
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("leasing task %s: %w", ticket, tasks.ErrNotQueued)
	}
	if err != nil {
		return t, fmt.Errorf("leasing task %s: %w", ticket, err)
	}
	return t, nil
}

// Extend restarts the visibility timeout.
func (s *Store) Extend(ctx context.Context, ticket string, now time.Time) error {
	return s.c.running(ctx, ticket, "extending", s.c.st.extend, now.UnixNano(), ticket)
}

// Ack marks the task done, keeping result.
func (s *Store) Ack(ctx context.Context, ticket string, result []byte, now time.Time) error {
	return s.c.running(ctx, ticket, "finishing", s.c.st.ack, now.UnixNano(), result, ticket)
}

// AckLease finishes ticket and leases next in one UPDATE of both rows,
// one fsynced commit: a task delivered and done then costs one commit, not
// the done's and the lease's (the commits were half of the instance's CPU
// per task, BenchmarkTasks). The lease is as durable as the done with it.
// The same statement checks that next is the oldest due (Peek's answer)
// and answers after: the delivery of a queue takes no Peek, with its read
// transaction, per task (a tenth of the CPU per task).
func (s *Store) AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (api.Task, bool, api.Task, error) {
	if err := s.c.write(ctx); err != nil {
		return api.Task{}, false, api.Task{}, fmt.Errorf("finishing task %s: %w", ticket, err)
	}
	defer s.c.mu.Unlock()
	r, err := s.ackLease(ctx, ticket, result, next, now)
	if err != nil {
		return api.Task{}, false, api.Task{}, fmt.Errorf("finishing task %s and leasing %s: %w", ticket, next, err)
	}
	if !r.acked {
		return api.Task{}, false, api.Task{}, fmt.Errorf("finishing task %s: %w", ticket, tasks.ErrNotRunning)
	}
	return r.leased, r.ok, r.after, nil
}

// uncancelled is ctx without its cancellation, for the statements of the
// hot path (enqueue, lease, ack, AckLease): database/sql and the driver
// start a goroutine per statement whose context can be cancelled (to
// close its rows, to interrupt it), and their start and end, around the
// fsync that the query's commit waits for, were a tenth of the instance's
// CPU per task (the scheduler and sysmon handing the blocked thread's P
// over). The query still waits at most busy_timeout for another process's
// write, under the store call's bound.
func uncancelled(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// handoff is what the UPDATE of AckLease answered.
type handoff struct {
	acked, ok     bool
	leased, after api.Task
}

func (s *Store) ackLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (handoff, error) {
	var h handoff
	rows, err := s.c.st.ackLease.QueryContext(uncancelled(ctx), ticket, now.UnixNano(), result, next)
	if err != nil {
		return h, err
	}
	defer rows.Close()
	for rows.Next() {
		var done bool
		var a struct {
			ticket, tool, priority sql.NullString
			bytes                  sql.NullInt64
		}
		t, err := scanTask(around{rows, []any{&done}, []any{&a.ticket, &a.tool, &a.priority, &a.bytes}})
		if err != nil {
			return h, err
		}
		if done {
			h.acked = true
			continue
		}
		h.leased, h.ok = t, true
		if a.ticket.Valid {
			h.after = api.Task{Ticket: a.ticket.String, Tool: a.tool.String, Priority: a.priority.String,
				Bytes: uint64(a.bytes.Int64), State: api.TaskQueued}
		}
	}
	if err := rows.Err(); err != nil {
		return handoff{}, err
	}
	// The commit is made when the statement is reset.
	if err := rows.Close(); err != nil {
		return handoff{}, err
	}
	return h, nil
}

// ackLeaseQuery updates ?1 (running: done at ?2, result ?3) and ?4
// (running from ?2) if ?4 is the oldest task due at ?2 and ?1 is running.
// SQLite picks the rows before it changes them; were it to change ?1
// first, ?4 would be left queued: a lease missed, never one taken without
// its ack, and the oldest-due test does not depend on it (?1 is not
// queued). Each row answers whether it was the done one, and ?4's the
// task due after it (not ?4, whether ?4 is changed yet or not).
func ackLeaseQuery() string {
	return `UPDATE tasks SET
		state = CASE WHEN ticket = ?1 THEN 'done' ELSE 'running' END,
		finished = CASE WHEN ticket = ?1 THEN ?2 ELSE finished END,
		result = CASE WHEN ticket = ?1 THEN ?3 ELSE result END,
		leased_at = CASE WHEN ticket = ?1 THEN 0 ELSE ?2 END
	WHERE (ticket = ?1 AND state = 'running') OR (ticket = ?4
		AND ?4 = (` + dueQuery + ` LIMIT 1)
		AND EXISTS (SELECT 1 FROM tasks WHERE ticket = ?1 AND state = 'running'))
	RETURNING ticket = ?1, ` + cols + `,
		` + afterCol("ticket") + `, ` + afterCol("tool") + `, ` + afterCol("priority") + `, ` + afterCol("bytes")
}

// dueQuery is the tickets queued and due at ?2, oldest first (Peek's
// order).
const dueQuery = `SELECT ticket FROM tasks WHERE state = 'queued' AND not_before <= ?2 ORDER BY enqueued, rowid`

// afterCol is column of the oldest task due at ?2 but ?4, on ?4's row.
func afterCol(column string) string {
	return `CASE WHEN ticket = ?4 THEN (SELECT ` + column + ` FROM tasks WHERE state = 'queued' AND not_before <= ?2
		AND ticket <> ?4 ORDER BY enqueued, rowid LIMIT 1) END`
}

// attempt is the update shared by Fail, Expire and Recover: one more
// attempt, then dead or queued again.
const attempt = `UPDATE tasks SET attempts = attempts + 1, last_error = ?, leased_at = 0,
	state = CASE WHEN attempts + 1 >= ? THEN 'dead' ELSE 'queued' END, not_before = ?`

// Fail counts a failed attempt.
func (s *Store) Fail(ctx context.Context, ticket, reason string, retryAt time.Time, maxAttempts int) (api.Task, error) {
	if err := s.c.write(ctx); err != nil {
		return api.Task{}, fmt.Errorf("failing task %s: %w", ticket, err)
	}
	t, err := scanTask(s.c.st.fail.QueryRowContext(ctx, reason, maxAttempts, nanos(retryAt), ticket))
	s.c.mu.Unlock()
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("failing task %s: %w", ticket, tasks.ErrNotRunning)
	}
	if err != nil {
		return t, fmt.Errorf("failing task %s: %w", ticket, err)
	}
	return t, nil
}

// Expire puts back the running tasks idle for visibility.
func (s *Store) Expire(ctx context.Context, now time.Time, visibility time.Duration, maxAttempts int) ([]api.Task, error) {
	return s.c.writeQuery(ctx, "expiring tasks", attempt+` WHERE state = 'running' AND leased_at <= ? RETURNING `+cols,
		fmt.Sprintf("not finished within %s (ack_timeout)", visibility), maxAttempts, 0, now.Add(-visibility).UnixNano())
}

// Recover puts back every running task: on one host, the instance lock
// makes this process the only holder of its name's tasks, so a running one
// was in flight when the instance died.
// It also removes the chunks of bodies that were being written then (a
// deferral or a replay's response cut off): they belong to no task.
func (s *Store) Recover(ctx context.Context, now time.Time, maxAttempts int) ([]api.Task, error) {
	back, err := s.c.writeQuery(ctx, "recovering tasks", attempt+` WHERE state = 'running' RETURNING `+cols,
		"in flight when gpuguard stopped", maxAttempts, 0)
	if err != nil {
		return back, err
	}
	return back, s.chunks.sweep(ctx)
}

// Get reads one task and its result.
func (s *Store) Get(ctx context.Context, ticket string) (api.Task, []byte, error) {
	var result []byte
	t, err := scanTask(around{s.c.db.QueryRowContext(ctx, `SELECT `+cols+`, result FROM tasks WHERE ticket = ?`, ticket), nil, []any{&result}})
	if errors.Is(err, sql.ErrNoRows) {
		return t, nil, fmt.Errorf("task %s: %w", ticket, tasks.ErrUnknown)
	}
	if err != nil {
		return t, nil, fmt.Errorf("reading task %s: %w", ticket, err)
	}
	return t, result, nil
}

// List reads every task, oldest first.
func (s *Store) List(ctx context.Context) ([]api.Task, error) {
	return s.c.query(ctx, "listing tasks", listQuery)
}

// Drop deletes a task and its bodies.
func (s *Store) Drop(ctx context.Context, ticket string) (api.Task, error) {
	if err := s.c.write(ctx); err != nil {
		return api.Task{}, fmt.Errorf("dropping task %s: %w", ticket, err)
	}
	defer s.c.mu.Unlock()
	var t api.Task
	err := s.c.tx(ctx, func(tx *sql.Tx) error {
		var body, result string
		var err error
		t, err = scanTask(around{tx.QueryRowContext(ctx, `DELETE FROM tasks WHERE ticket = ? RETURNING `+cols+`, body, result_body`, ticket),
			nil, []any{&body, &result}})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM bodies WHERE id IN (?, ?)`, body, result)
		return err
	})
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("dropping task %s: %w", ticket, tasks.ErrUnknown)
	}
	if err != nil {
		return t, fmt.Errorf("dropping task %s: %w", ticket, err)
	}
	return t, nil
}

// Retry puts a dead task back, attempts reset.
func (s *Store) Retry(ctx context.Context, ticket string, now time.Time) error {
	if err := s.c.write(ctx); err != nil {
		return fmt.Errorf("retrying task %s: %w", ticket, err)
	}
	res, err := s.c.db.ExecContext(ctx, `UPDATE tasks SET state = 'queued', attempts = 0, not_before = 0
		WHERE ticket = ? AND state = 'dead'`, ticket)
	s.c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("retrying task %s: %w", ticket, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	if _, _, err := s.Get(ctx, ticket); err != nil {
		return fmt.Errorf("retrying: %w", err)
	}
	return fmt.Errorf("retrying task %s: %w", ticket, tasks.ErrNotDead)
}

// Counts counts the tasks by state.
func (s *Store) Counts(ctx context.Context) (api.TaskCounts, error) {
	var c api.TaskCounts
	rows, err := s.c.db.QueryContext(ctx, `SELECT state, count(*) FROM tasks GROUP BY state`)
	if err != nil {
		return c, fmt.Errorf("counting tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return c, fmt.Errorf("counting tasks: %w", err)
		}
		switch state {
		case api.TaskQueued:
			c.Queued = n
		case api.TaskRunning:
			c.Running = n
		case api.TaskDone:
			c.Done = n
		case api.TaskDead:
			c.Dead = n
		}
	}
	return c, rows.Err()
}

// Purge deletes done tasks finished before before, and their bodies.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	if err := s.c.write(ctx); err != nil {
		return 0, fmt.Errorf("purging done tasks: %w", err)
	}
	defer s.c.mu.Unlock()
	var n int64
	err := s.c.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM bodies WHERE id IN (
			SELECT body FROM tasks WHERE state = 'done' AND finished < ?1 AND body <> ''
			UNION ALL SELECT result_body FROM tasks WHERE state = 'done' AND finished < ?1 AND result_body <> '')`,
			before.UnixNano()); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE state = 'done' AND finished < ?`, before.UnixNano())
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("purging done tasks: %w", err)
	}
	return int(n), nil
}

// Exists reports whether stateDir holds a store (an instance ever
// deferred a task there).
func Exists(stateDir string) bool {
	_, err := os.Lstat(filepath.Join(stateDir, Dir, File))
	return err == nil
}

// EnqueueMany stores ts as queued in one transaction (one fsync): an
// import, or a benchmark's full queue. Tickets already stored are kept.
func (s *Store) EnqueueMany(ctx context.Context, ts []api.Task) error {
	if err := s.c.write(ctx); err != nil {
		return fmt.Errorf("storing tasks: %w", err)
	}
	defer s.c.mu.Unlock()
	err := s.c.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO tasks (ticket, tool, priority, bytes, payload, state, enqueued)
			VALUES (?, ?, ?, ?, ?, 'queued', ?) ON CONFLICT (ticket) DO NOTHING`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, t := range ts {
			if _, err := st.ExecContext(ctx, t.Ticket, t.Tool, t.Priority, t.Bytes, []byte(t.Payload), nanos(t.Enqueued)); err != nil {
				return fmt.Errorf("task %s: %w", t.Ticket, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storing tasks: %w", err)
	}
	return nil
}

// Each calls fn with every task, oldest first, without payloads, as the
// rows are read: listing 100,000 tasks holds one at a time.
func (s *Store) Each(ctx context.Context, fn func(api.Task) error) error {
	return s.c.each(ctx, "listing tasks", listQuery, fn)
}
