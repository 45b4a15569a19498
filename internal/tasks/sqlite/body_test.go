package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/gpuguard/gpuguard/api"
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
	if err := s.c.db.QueryRow(`SELECT count(*) FROM bodies`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStreamsBodies(t *testing.T) {
	taskstest.StreamsBodies(t, openTest(t))
}

func TestBodiesLeaveNoChunks(t *testing.T) {
	s := openTest(t)
	taskstest.LeavesNoBodies(t, s, func() int { return chunkRows(t, s) })
}

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
		if err := s.chunks.put(ctx, id, 0, []byte("chunk")); err != nil {
			t.Fatal(err)
		}
	}
	s.chunks.writing.add("b-writing")
	if _, err := s.Recover(ctx, now, 5); err != nil {
		t.Fatal(err)
	}
	var ids []string
	rows, err := s.c.db.Query(`SELECT id FROM bodies ORDER BY id`)
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
