package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"

	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
	"github.com/gpuguard/gpuguard/internal/tasks/taskstest"
)

func TestConformance(t *testing.T) {
	taskstest.Run(t, func(t *testing.T) taskstest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) tasks.Store {
			s, err := sqlite.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
	})
}

// Two handles on one file (the instance and `gpuguard tasks`) see each
// other's writes, and a lease is taken by exactly one of them.
func TestSharedByTwoHandles(t *testing.T) {
	dir := t.TempDir()
	a, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	now := time.Now()
	if err := a.Enqueue(ctx, api.Task{Ticket: "t-1", Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now}, 10); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*sqlite.Store{a, b} {
		wg.Go(func() { _, errs[i] = s.Lease(ctx, "t-1", now) })
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("lease results %v, want exactly one success", errs)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].State != api.TaskRunning {
		t.Fatalf("second handle lists %+v %v", list, err)
	}
}

// The database is WAL with synchronous=FULL (each commit is fsynced), and
// private to the user.
func TestDurabilitySettings(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A lease runs at NORMAL; every other write, after it, at FULL again.
	ctx := context.Background()
	now := time.Now()
	s.Enqueue(ctx, api.Task{Ticket: "t-1", Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now}, 10)
	if _, err := s.Lease(ctx, "t-1", now); err != nil {
		t.Fatal(err)
	}
	mode, level, err := sqlite.Pragmas(s)
	if err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || level != 2 {
		t.Fatalf("journal_mode %q synchronous %d, want wal and 2 (FULL)", mode, level)
	}
	fi, err := os.Stat(filepath.Join(dir, sqlite.Dir, sqlite.File))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
}

// Leases (synchronous=NORMAL for their commit alone) interleaved with
// enqueues and acks from other goroutines of one process: every write
// lands, each task is leased once, and the connection ends at FULL.
func TestLeaseAmongConcurrentWrites(t *testing.T) {
	s, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 3*n)
	for i := range n {
		wg.Go(func() {
			tk := fmt.Sprintf("t-%02d", i)
			if err := s.Enqueue(ctx, api.Task{Ticket: tk, Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now.Add(time.Duration(i))}, 1000); err != nil {
				errs <- err
				return
			}
			if _, err := s.Lease(ctx, tk, now.Add(time.Second)); err != nil {
				errs <- err
				return
			}
			if err := s.Ack(ctx, tk, nil, now.Add(2*time.Second)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c, err := s.Counts(ctx)
	if err != nil || c.Done != n || c.Queued+c.Running+c.Dead != 0 {
		t.Fatalf("counts %+v %v, want %d done", c, err, n)
	}
	if _, level, err := sqlite.Pragmas(s); err != nil || level != 2 {
		t.Fatalf("synchronous %d %v, want 2 (FULL)", level, err)
	}
}

// A symlink where the database should be is refused, not followed.
func TestRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, sqlite.Dir), 0o700)
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, filepath.Join(dir, sqlite.Dir, sqlite.File)); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(dir); err == nil {
		s.Close()
		t.Fatal("opened the store through a symlink")
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the symlink's target was created")
	}
}

// The store as the instance opens it (tasks.Lazy) conforms too, and
// creates nothing until a task is enqueued.
func TestLazyConformance(t *testing.T) {
	taskstest.Run(t, func(t *testing.T) taskstest.Opener {
		dir := t.TempDir()
		return func(t *testing.T) tasks.Store {
			l := tasks.NewLazy(func() (tasks.Store, error) { return sqlite.Open(dir) }, func() bool { return sqlite.Exists(dir) })
			t.Cleanup(func() { l.Close() })
			return l
		}
	})
	dir := t.TempDir()
	l := tasks.NewLazy(func() (tasks.Store, error) { return sqlite.Open(dir) }, func() bool { return sqlite.Exists(dir) })
	defer l.Close()
	if c, err := l.Counts(context.Background()); err != nil || c != (api.TaskCounts{}) {
		t.Fatalf("counts of a store never created: %+v %v", c, err)
	}
	if sqlite.Exists(dir) {
		t.Fatal("reading created the store")
	}
}

// A task done and the next leased (AckLease) is one commit, one fsync: the
// commits in the WAL are counted (a commit frame carries the database's
// size), a reader holding a snapshot keeping it from being reset.
func TestAckLeaseIsOneCommit(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	const n = 40
	ts := make([]api.Task, n)
	for i := range ts {
		ts[i] = api.Task{Ticket: fmt.Sprintf("t-%04d", i), Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now.Add(time.Duration(i))}
	}
	if err := s.EnqueueMany(ctx, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, sqlite.Dir, sqlite.File)
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var c int
	if err := tx.QueryRow(`SELECT count(*) FROM tasks`).Scan(&c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lease(ctx, ts[0].Ticket, now); err != nil {
		t.Fatal(err)
	}
	before := walCommits(t, path+"-wal")
	var after api.Task
	for i := range n - 1 {
		got, leased, a, err := s.AckLease(ctx, ts[i].Ticket, nil, ts[i+1].Ticket, now)
		if err != nil || !leased || got.Ticket != ts[i+1].Ticket {
			t.Fatalf("AckLease %d: %+v leased %v, %v", i, got, leased, err)
		}
		// The store tells the task due next: no Peek is needed for it.
		if i > 0 && after.Ticket != ts[i+1].Ticket {
			t.Fatalf("after %d told %q, want %s", i-1, after.Ticket, ts[i+1].Ticket)
		}
		after = a
	}
	if after.Ticket != "" {
		t.Fatalf("after the last: %+v, want none", after)
	}
	if got := walCommits(t, path+"-wal") - before; got != n-1 {
		t.Fatalf("%d commits for %d tasks done and leased, want one each", got, n-1)
	}
}

// walCommits counts the commit frames of the WAL at path (those of its
// current salt).
func walCommits(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		t.Fatalf("WAL of %d bytes", len(b))
	}
	page := int(binary.BigEndian.Uint32(b[8:]))
	salt := b[16:24]
	n := 0
	for off := 32; off+24+page <= len(b); off += 24 + page {
		h := b[off : off+24]
		if !bytes.Equal(h[8:16], salt) {
			break
		}
		if binary.BigEndian.Uint32(h[4:]) != 0 {
			n++
		}
	}
	return n
}
