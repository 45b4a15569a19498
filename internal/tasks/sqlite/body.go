package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// bodiesSchema keeps tasks' bodies apart from their rows, a chunk a row
// (tasks.ChunkSize), so that a body is written as it arrives and read
// back as it is sent: never whole in memory. A task names its bodies by
// id (tasks.body, tasks.result_body); a body with no task naming it is
// one whose write was cut off.
const bodiesSchema = `
CREATE TABLE IF NOT EXISTS bodies (
	id   TEXT NOT NULL,
	seq  INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (id, seq)
);
`

// addBodyColumns adds the body columns to a store made before tasks had
// bodies (CREATE TABLE IF NOT EXISTS leaves an old table as it is).
func addBodyColumns(db *sql.DB) error {
	for _, col := range []string{"body", "result_body"} {
		if columnExists(db, col) {
			continue
		}
		_, err := db.Exec(`ALTER TABLE tasks ADD COLUMN ` + col + ` TEXT NOT NULL DEFAULT ''`)
		if err != nil && !columnExists(db, col) { // another process added it first
			return fmt.Errorf("adding column %s: %w", col, err)
		}
	}
	return nil
}

// columnExists reports whether the tasks table has column col (false
// when that cannot be read: the ALTER that follows says why).
func columnExists(db *sql.DB, col string) bool {
	var n int
	err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('tasks') WHERE name = ?`, col).Scan(&n)
	return err == nil && n == 1
}

// bodySet is the ids of the bodies being written by this store.
type bodySet struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (b *bodySet) add(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ids == nil {
		b.ids = map[string]struct{}{}
	}
	b.ids[id] = struct{}{}
}

func (b *bodySet) remove(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.ids, id)
}

// list is the ids as a JSON array, for json_each.
func (b *bodySet) list() string {
	b.mu.Lock()
	ids := make([]string, 0, len(b.ids))
	for id := range b.ids {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	out, _ := json.Marshal(ids)
	return string(out)
}

// chunks are the tasks' bodies in the bodies table, over the store's
// connection: written as they arrive and read back a chunk at a time
// (moves: tasks.Bodies).
type chunks struct {
	c *conn
	// writing are the bodies this store is writing now, which Recover's
	// sweep of orphan chunks leaves alone.
	writing bodySet
	moves   tasks.Bodies
}

// write writes body as the chunks of a new id, and answers the id ("" for
// an empty body); on an error nothing of it is left. The caller calls
// b.writing.remove(id) once a task names it (or drop, if none will).
func (b *chunks) write(ctx context.Context, body io.Reader) (string, error) {
	id := tasks.NewBodyID()
	b.writing.add(id)
	n, err := b.moves.Write(body, func(seq int, chunk []byte) error { return b.put(ctx, id, seq, chunk) })
	if err != nil {
		b.drop(ctx, id)
		return "", err
	}
	if n == 0 {
		b.writing.remove(id)
		return "", nil
	}
	return id, nil
}

// put writes one chunk, not fsynced on its own (synchronous=NORMAL, as
// Lease): the commit that then stores its task, or its result, fsyncs the
// WAL and with it every chunk written before, a WAL being written in
// order; a chunk lost to a crash belonged to no task yet. A body of 16
// MiB then costs one fsync, not 64.
func (b *chunks) put(ctx context.Context, id string, seq int, chunk []byte) error {
	if err := b.c.write(ctx); err != nil {
		return err
	}
	defer b.c.mu.Unlock()
	return b.c.unfsynced(ctx, func() error {
		_, err := b.c.db.ExecContext(uncancelled(ctx), `INSERT INTO bodies (id, seq, data) VALUES (?, ?, ?)`, id, seq, chunk)
		return err
	})
}

// drop removes what was written of a body that no task names, as well
// as it can: what is left is swept by the next start's Recover.
func (b *chunks) drop(ctx context.Context, id string) {
	defer b.writing.remove(id)
	if id == "" {
		return
	}
	if err := b.c.write(ctx); err != nil {
		return
	}
	defer b.c.mu.Unlock()
	_, _ = b.c.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM bodies WHERE id = ?`, id)
}

// EnqueueBody writes body's chunks, then stores t naming them.
func (s *Store) EnqueueBody(ctx context.Context, t api.Task, body io.Reader, maxTasks int) error {
	id, err := s.chunks.write(ctx, body)
	if err != nil {
		return fmt.Errorf("storing task %s: %w", t.Ticket, err)
	}
	stored, err := s.enqueue(ctx, t, id, maxTasks)
	if !stored {
		s.chunks.drop(ctx, id)
		return err
	}
	s.chunks.writing.remove(id)
	return nil
}

// AckBody writes body's chunks, then marks the task done naming them and
// removes its request body, in one commit.
func (s *Store) AckBody(ctx context.Context, ticket string, result []byte, body io.Reader, now time.Time) error {
	id, err := s.chunks.write(ctx, body)
	if err != nil {
		return fmt.Errorf("finishing task %s: %w", ticket, err)
	}
	if err := s.c.write(ctx); err != nil {
		s.chunks.drop(ctx, id)
		return fmt.Errorf("finishing task %s: %w", ticket, err)
	}
	err = s.c.tx(uncancelled(ctx), func(tx *sql.Tx) error {
		var old string
		err := tx.QueryRow(`SELECT body FROM tasks WHERE ticket = ? AND state = 'running'`, ticket).Scan(&old)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE tasks SET state = 'done', finished = ?, result = ?, result_body = ?, body = '', leased_at = 0
			WHERE ticket = ?`, now.UnixNano(), result, id, ticket); err != nil {
			return err
		}
		_, err = tx.Exec(`DELETE FROM bodies WHERE id = ?`, old)
		return err
	})
	s.c.mu.Unlock()
	if err != nil {
		s.chunks.drop(ctx, id)
		if errors.Is(err, sql.ErrNoRows) {
			err = tasks.ErrNotRunning
		}
		return fmt.Errorf("finishing task %s: %w", ticket, err)
	}
	s.chunks.writing.remove(id)
	return nil
}

// RequestBody opens a task's request body.
func (s *Store) RequestBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	return s.body(ctx, ticket, "request body", "body")
}

// ResultBody opens a done task's result body.
func (s *Store) ResultBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error) {
	return s.body(ctx, ticket, "result body", "result_body")
}

// body opens the body named by the task's column col, reading a chunk a
// query.
func (s *Store) body(ctx context.Context, ticket, which, col string) (io.ReadCloser, int64, error) {
	var id string
	var size int64
	err := s.c.db.QueryRowContext(ctx, `SELECT `+col+`, (SELECT coalesce(sum(length(data)), 0) FROM bodies WHERE id = tasks.`+col+`)
		FROM tasks WHERE ticket = ?`, ticket).Scan(&id, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, fmt.Errorf("task %s: %w", ticket, tasks.ErrUnknown)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading the %s of task %s: %w", which, ticket, err)
	}
	if id == "" {
		return tasks.EmptyBody(), 0, nil
	}
	return s.chunks.open(ctx, id), size, nil
}

// open reads body id back, a chunk a query.
func (b *chunks) open(ctx context.Context, id string) io.ReadCloser {
	return b.moves.Reader(ctx, func(ctx context.Context, seq int, dst []byte) ([]byte, error) {
		return b.chunk(ctx, id, seq, dst)
	})
}

// chunk copies chunk seq of body id into dst: read as sql.RawBytes, so
// that database/sql makes no copy of its own.
func (b *chunks) chunk(ctx context.Context, id string, seq int, dst []byte) ([]byte, error) {
	rows, err := b.c.db.QueryContext(ctx, `SELECT data FROM bodies WHERE id = ? AND seq = ?`, id, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, io.EOF
	}
	var raw sql.RawBytes
	if err := rows.Scan(&raw); err != nil {
		return nil, err
	}
	if len(raw) > len(dst) {
		return nil, fmt.Errorf("chunk %d of body %s is %d bytes, over %d", seq, id, len(raw), len(dst))
	}
	return dst[:copy(dst, raw)], rows.Close()
}

// sweep removes the chunks that no task names and that this store is not
// writing now: bodies whose write was cut off by a crash.
func (b *chunks) sweep(ctx context.Context) error {
	if err := b.c.write(ctx); err != nil {
		return fmt.Errorf("sweeping unfinished bodies: %w", err)
	}
	defer b.c.mu.Unlock()
	_, err := b.c.db.ExecContext(ctx, `DELETE FROM bodies WHERE id NOT IN (SELECT body FROM tasks)
		AND id NOT IN (SELECT result_body FROM tasks) AND id NOT IN (SELECT value FROM json_each(?))`, b.writing.list())
	if err != nil {
		return fmt.Errorf("sweeping unfinished bodies: %w", err)
	}
	return nil
}
