package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/sqlite"
)

// TestLazyAsksOnceWhetherItExists: an embedded store that does not exist
// is looked for once; the reads the deliverer makes every few seconds
// (counts, expiries, purges) then answer an empty queue without looking
// again, until an Enqueue creates the store and they read it.
func TestLazyAsksOnceWhetherItExists(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var looks, opens int
	l := tasks.NewLazy(func() (tasks.Store, error) { opens++; return sqlite.Open(dir) },
		func() bool { looks++; return sqlite.Exists(dir) })
	defer l.Close()
	now := time.Now()
	for range 5 {
		if c, err := l.Counts(ctx); err != nil || c != (api.TaskCounts{}) {
			t.Fatalf("counts of no store: %+v %v", c, err)
		}
		if back, err := l.Expire(ctx, now, time.Minute, 3); err != nil || len(back) != 0 {
			t.Fatalf("expire on no store: %v %v", back, err)
		}
		if n, err := l.Purge(ctx, now); err != nil || n != 0 {
			t.Fatalf("purge on no store: %d %v", n, err)
		}
	}
	if looks != 1 || opens != 0 {
		t.Fatalf("15 reads of a store that does not exist: %d looks, %d opens; want 1 and 0", looks, opens)
	}
	if err := l.Enqueue(ctx, api.Task{Ticket: "t1", Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now}, 10); err != nil {
		t.Fatal(err)
	}
	if c, err := l.Counts(ctx); err != nil || c.Queued != 1 || opens != 1 {
		t.Fatalf("counts after an enqueue: %+v %v, %d opens; want 1 queued, 1 open", c, err, opens)
	}
	// The next run finds the store and opens it at its first read.
	l.Close()
	again := tasks.NewLazy(func() (tasks.Store, error) { return sqlite.Open(dir) }, func() bool { return sqlite.Exists(dir) })
	defer again.Close()
	if c, err := again.Counts(ctx); err != nil || c.Queued != 1 {
		t.Fatalf("counts in the next run: %+v %v, want 1 queued", c, err)
	}
}
