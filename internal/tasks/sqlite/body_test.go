package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/taskstest"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func chunkRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM bodies`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStreamsBodies(t *testing.T) {
	taskstest.StreamsBodies(t, openTest(t))
}

// TestBodiesLeaveNoChunks: a body that failed, one refused (full queue,
// duplicate ticket, a task not running) and the bodies of a dropped and
// a purged task leave no chunk behind; a stored one leaves its own.
func TestBodiesLeaveNoChunks(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now()
	body := func(n int) io.Reader { return bytes.NewReader(make([]byte, n)) }
	task := func(ticket string) api.Task {
		return api.Task{Ticket: ticket, Tool: "http", Priority: "P2", Enqueued: now}
	}
	if err := s.EnqueueBody(ctx, task("t-1"), body(3*tasks.ChunkSize), 10); err != nil {
		t.Fatal(err)
	}
	if n := chunkRows(t, s); n != 3 {
		t.Fatalf("%d chunk rows for a body of 3 chunks", n)
	}
	failing := io.MultiReader(body(tasks.ChunkSize+1), errReader{})
	if err := s.EnqueueBody(ctx, task("t-2"), failing, 10); !errors.Is(err, tasks.ErrBody) {
		t.Fatal(err)
	}
	if err := s.EnqueueBody(ctx, task("t-1"), body(2*tasks.ChunkSize), 10); err != nil { // duplicate
		t.Fatal(err)
	}
	if err := s.EnqueueBody(ctx, task("t-3"), body(2*tasks.ChunkSize), 1); !errors.Is(err, tasks.ErrFull) {
		t.Fatal(err)
	}
	if err := s.AckBody(ctx, "t-1", nil, body(tasks.ChunkSize), now); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatal(err)
	}
	if n := chunkRows(t, s); n != 3 {
		t.Fatalf("%d chunk rows after the refused bodies, want t-1's 3", n)
	}
	if _, err := s.Lease(ctx, "t-1", now); err != nil {
		t.Fatal(err)
	}
	if err := s.AckBody(ctx, "t-1", nil, body(2*tasks.ChunkSize), now); err != nil {
		t.Fatal(err)
	}
	if n := chunkRows(t, s); n != 2 {
		t.Fatalf("%d chunk rows once done, want the result's 2 (the request body goes)", n)
	}
	if _, err := s.Purge(ctx, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueBody(ctx, task("t-4"), body(tasks.ChunkSize), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Drop(ctx, "t-4"); err != nil {
		t.Fatal(err)
	}
	if n := chunkRows(t, s); n != 0 {
		t.Fatalf("%d chunk rows after a purge and a drop", n)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("reset by peer") }

// TestRecoverSweepsCutBodies: chunks that no task names (a write cut off
// by a crash) are removed at the next start's Recover, but not those of a
// body being written now, nor a task's.
func TestRecoverSweepsCutBodies(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Now()
	if err := s.EnqueueBody(ctx, api.Task{Ticket: "t-1", Tool: "http", Enqueued: now}, bytes.NewReader([]byte("kept")), 10); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b-cut", "b-writing"} {
		if err := s.putChunk(ctx, id, 0, []byte("chunk")); err != nil {
			t.Fatal(err)
		}
	}
	s.writing.add("b-writing")
	if _, err := s.Recover(ctx, now, 5); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := s.db.Query(`SELECT id FROM bodies ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 2 || ids[1] != "b-writing" {
		t.Fatalf("bodies after Recover: %v, want t-1's and b-writing", ids)
	}
}

// TestOldStoreGainsBodies: a store made before tasks had bodies opens,
// keeps its tasks, and takes bodies.
func TestOldStoreGainsBodies(t *testing.T) {
	path := filepath.Join(t.TempDir(), File)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE tasks (ticket TEXT PRIMARY KEY, tool TEXT NOT NULL, priority TEXT NOT NULL,
		bytes INTEGER NOT NULL, payload BLOB, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
		last_error TEXT NOT NULL DEFAULT '', enqueued INTEGER NOT NULL, not_before INTEGER NOT NULL DEFAULT 0,
		leased_at INTEGER NOT NULL DEFAULT 0, finished INTEGER NOT NULL DEFAULT 0, result BLOB);
		INSERT INTO tasks (ticket, tool, priority, bytes, payload, state, enqueued) VALUES ('t-old', 'http', 'P2', 0, '{}', 'queued', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if r, n, err := s.RequestBody(ctx, "t-old"); err != nil || n != 0 {
		t.Fatalf("an old task's body: %d %v", n, err)
	} else {
		r.Close()
	}
	if err := s.EnqueueBody(ctx, api.Task{Ticket: "t-new", Tool: "http", Enqueued: time.Now()}, bytes.NewReader([]byte("new")), 10); err != nil {
		t.Fatal(err)
	}
	if r, n, err := s.RequestBody(ctx, "t-new"); err != nil || n != 3 {
		t.Fatalf("a new task's body: %d %v", n, err)
	} else {
		r.Close()
	}
}
