package deliver

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/gpuguard/gpuguard/api"
)

// taskCounts are the deferred tasks by state as the deliverer knows them:
// read from the store (refresh), and moved by each change the deliverer
// makes itself (a write), since re-reading them at every transition would
// cost a query per task. A re-read catches the changes made elsewhere
// (`gpuguard tasks`, another host of a shared store).
//
// A write is the store call and the move it makes, together: a re-read
// that fell between the two would see the change in the store and then
// count it a second time. So no re-read happens while a write is open: it
// is owed, and done at the deliverer's next pass once the last write has
// closed (which pokes the deliverer).
type taskCounts struct {
	cur atomic.Pointer[api.TaskCounts]
	// known: the store's counts were read, and no read failed since;
	// until then the queue is not taken for empty.
	known atomic.Bool
	// poke wakes the deliverer, to pay an owed re-read.
	poke func()

	mu     sync.Mutex // serialises the changes of cur, and a re-read with the writes
	writes int        // writes open
	owed   bool       // a re-read was skipped while writes were open
}

func newTaskCounts(poke func()) *taskCounts {
	c := &taskCounts{poke: poke}
	c.cur.Store(&api.TaskCounts{})
	return c
}

// load answers the counts, and whether they are known (see known).
func (c *taskCounts) load() (api.TaskCounts, bool) {
	return *c.cur.Load(), c.known.Load()
}

// countWrite is a store write the counts wait for: opened before the
// store call, closed once the deliverer knows what it changed.
type countWrite struct{ c *taskCounts }

// write opens a write; it waits for a re-read under way.
func (c *taskCounts) write() countWrite {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return countWrite{c}
}

// done closes w, applying its moves (none: the write changed nothing).
// Closing the last open write while a re-read is owed pokes the deliverer.
func (w countWrite) done(moves ...func(*api.TaskCounts)) {
	c := w.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes--
	if len(moves) > 0 {
		n := *c.cur.Load()
		for _, move := range moves {
			move(&n)
			n.Queued, n.Running = max(n.Queued, 0), max(n.Running, 0)
		}
		c.cur.Store(&n)
	}
	if c.writes == 0 && c.owed {
		c.poke()
	}
}

// isOwed reports whether a re-read was skipped since the last one.
func (c *taskCounts) isOwed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owed
}

// refresh re-reads the counts from store, unless a write is open: the
// re-read is then owed (see taskCounts).
func (c *taskCounts) refresh(ctx context.Context, store Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes > 0 {
		c.owed = true
		return
	}
	c.owed = false
	n, err := store.Counts(ctx)
	if err == nil {
		c.cur.Store(&n)
	}
	c.known.Store(err == nil)
}

// The moves of the deliverer's writes.

func queued(c *api.TaskCounts)  { c.Queued++ }
func started(c *api.TaskCounts) { c.Queued--; c.Running++ }
func finished(c *api.TaskCounts) {
	c.Running--
	c.Done++
}

// attempted is the move of a task an attempt was counted for (t as the
// store answered it): queued again, or dead.
func attempted(t api.Task) func(*api.TaskCounts) {
	return func(c *api.TaskCounts) {
		c.Running--
		if t.State == api.TaskDead {
			c.Dead++
		} else {
			c.Queued++
		}
	}
}
