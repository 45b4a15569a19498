package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// conn is the store's one connection and its write discipline.
//
// The statements a delivered task runs (enqueue, peek, lease, ack) are
// prepared once at open: parsing them at every call was a fifth of the
// instance's CPU per task (perf, BenchmarkTasks). mu serialises this
// process's writes, so that no write runs between a switch to
// synchronous=NORMAL (unfsynced) and its switch back (the pool's one
// connection would otherwise carry the lowered level to it).
type conn struct {
	db *sql.DB
	st stmts

	mu sync.Mutex
	// unsynced is set while the connection may still be at
	// synchronous=NORMAL (unfsynced could not switch it back): every write
	// first switches it back, and fails rather than commit undurably.
	unsynced bool
}

// stmts are the prepared statements of the hot path.
type stmts struct {
	enqueue, exists, peek, peekWake, lease, ack, ackLease, extend, fail, normal, full *sql.Stmt

	all []*sql.Stmt // each of the above, for close
}

// prepare prepares the hot path's statements.
func (c *conn) prepare() error {
	for _, p := range []struct {
		st    **sql.Stmt
		query string
	}{
		{&c.st.enqueue, enqueueQuery},
		{&c.st.exists, `SELECT 1 FROM tasks WHERE ticket = ?`},
		{&c.st.peek, `SELECT ` + listCols + ` FROM tasks
			WHERE state = 'queued' AND not_before <= ? ORDER BY enqueued, rowid LIMIT 1`},
		{&c.st.peekWake, `SELECT min(not_before) FROM tasks WHERE state = 'queued'`},
		{&c.st.lease, `UPDATE tasks SET state = 'running', leased_at = ?
			WHERE ticket = ? AND state = 'queued' AND not_before <= ? RETURNING ` + cols},
		{&c.st.ack, `UPDATE tasks SET state = 'done', finished = ?, result = ?, leased_at = 0
			WHERE ticket = ? AND state = 'running'`},
		{&c.st.ackLease, ackLeaseQuery()},
		{&c.st.extend, `UPDATE tasks SET leased_at = ? WHERE ticket = ? AND state = 'running'`},
		{&c.st.fail, attempt + ` WHERE ticket = ? AND state = 'running' RETURNING ` + cols},
		{&c.st.normal, `PRAGMA synchronous = NORMAL`},
		{&c.st.full, `PRAGMA synchronous = FULL`},
	} {
		st, err := c.db.Prepare(p.query)
		if err != nil {
			return err
		}
		*p.st = st
		c.st.all = append(c.st.all, st)
	}
	return nil
}

// close closes the statements and the database.
func (c *conn) close() error {
	for _, st := range c.st.all {
		st.Close()
	}
	return c.db.Close()
}

// write takes the write lock, first making sure that the connection is
// back at synchronous=FULL; unlock with c.mu.Unlock.
func (c *conn) write(ctx context.Context) error {
	c.mu.Lock()
	if !c.unsynced {
		return nil
	}
	if _, err := c.st.full.ExecContext(ctx); err != nil {
		c.mu.Unlock()
		return fmt.Errorf("restoring synchronous=FULL: %w", err)
	}
	c.unsynced = false
	return nil
}

// unfsynced runs fn, a write not fsynced on its own, at
// synchronous=NORMAL, and switches back to FULL (or leaves that to the
// next write). The write lock is held.
func (c *conn) unfsynced(ctx context.Context, fn func() error) error {
	if _, err := c.st.normal.ExecContext(ctx); err != nil {
		return err
	}
	err := fn()
	if _, ferr := c.st.full.ExecContext(context.WithoutCancel(ctx)); ferr != nil {
		c.unsynced = true // the next write switches it back, or fails
	}
	return err
}

// tx runs fn in a transaction (the write lock held), committed if fn
// answers nil.
func (c *conn) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// running runs an update of a running task; no row is ErrNotRunning.
func (c *conn) running(ctx context.Context, ticket, what string, st *sql.Stmt, args ...any) error {
	if err := c.write(ctx); err != nil {
		return fmt.Errorf("%s task %s: %w", what, ticket, err)
	}
	res, err := st.ExecContext(uncancelled(ctx), args...)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s task %s: %w", what, ticket, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s task %s: %w", what, ticket, tasks.ErrNotRunning)
	}
	return nil
}

// writeQuery is query for an update ... RETURNING, under the write lock.
func (c *conn) writeQuery(ctx context.Context, what, query string, args ...any) ([]api.Task, error) {
	if err := c.write(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer c.mu.Unlock()
	return c.query(ctx, what, query, args...)
}

// query answers the tasks that query selects (cols, in their order).
func (c *conn) query(ctx context.Context, what, query string, args ...any) ([]api.Task, error) {
	var out []api.Task
	err := c.each(ctx, what, query, func(t api.Task) error {
		out = append(out, t)
		return nil
	}, args...)
	return out, err
}

// each calls fn with every task that query selects, as the rows are read;
// fn's error ends it, as it is.
func (c *conn) each(ctx context.Context, what, query string, fn func(api.Task) error, args ...any) error {
	rows, err := c.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
