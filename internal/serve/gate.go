package serve

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Why a held request was not let through.
var (
	errHold       = errors.New("the child was not ready within hold")
	errFull       = errors.New("too many requests are waiting for the child")
	errShutdown   = errors.New("gpuguard is shutting down")
	errClientGone = errors.New("the client closed its connection")
)

// gate lets requests through to the child while it is open, holds them in
// arrival order while it is closed, and counts those in flight so that a
// drain knows when the child has finished with them.
type gate struct {
	mu       sync.Mutex
	open     bool
	shut     bool // for good: gpuguard is ending
	inflight int
	// deferring counts the requests whose bodies are being written to
	// the deferred-task store: they count toward maxHeld, as waiters do.
	deferring int
	waiters   list.List       // *waiter, oldest first
	idle      []chan struct{} // closed when inflight falls to 0
	lastEnd   time.Time       // the last request in flight ended (activity.go)
}

type waiter struct {
	ch       chan struct{}
	elem     *list.Element
	admitted bool
	err      error // set with ch closed and admitted false: shutdown

	watch watcher     // nil: the waiter waits on ch
	stop  atomic.Bool // set before watch is woken: the wait is over
}

// release ends w's wait (admitted or shut out, as set under g.mu).
func (w *waiter) release() {
	close(w.ch)
	if w.watch != nil {
		w.stop.Store(true)
		w.watch.wake()
	}
}

// watcher waits for a held request's client to leave, in the request's
// own goroutine, on its connection (clientConn, on Linux): nothing reads
// a held request's body, so net/http cannot see its client leave.
type watcher interface {
	// wait blocks until the client has left (true), or until passes, or
	// wake was called with stop set (false).
	wait(until time.Time, stop *atomic.Bool) (gone bool)
	// wake ends a wait whose stop is set.
	wake()
}

// enter returns once the request may go to the child (nil: it is counted
// in flight until leave), or with why not: errFull at once when maxHeld
// are waiting, errHold after hold, errShutdown, or ctx's error when the
// client went away (its place is freed). waited says how long it was held
// (0 when it went straight through).
func (g *gate) enter(ctx context.Context, hold time.Duration, maxHeld int) (waited time.Duration, err error) {
	return g.wait(ctx, hold, maxHeld, nil)
}

// wait is enter with watch, when not nil, watching the client while the
// request is held: it left, and the request gets errClientGone, its place
// freed at once.
func (g *gate) wait(ctx context.Context, hold time.Duration, maxHeld int, watch watcher) (waited time.Duration, err error) {
	g.mu.Lock()
	switch {
	case g.shut:
		g.mu.Unlock()
		return 0, errShutdown
	case g.open && g.waiters.Len() == 0:
		g.inflight++
		g.mu.Unlock()
		return 0, nil
	case g.waiters.Len()+g.deferring >= maxHeld:
		g.mu.Unlock()
		return 0, errFull
	case hold <= 0:
		g.mu.Unlock()
		return 0, errHold
	}
	w := &waiter{ch: make(chan struct{}), watch: watch}
	w.elem = g.waiters.PushBack(w)
	g.mu.Unlock()

	start := time.Now()
	if watch != nil {
		err = w.watchClient(ctx, start.Add(hold))
	} else {
		t := time.NewTimer(hold)
		defer t.Stop()
		select {
		case <-w.ch:
		case <-t.C:
			err = errHold
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case w.admitted:
		return time.Since(start), nil // let through as the time ran out: it goes
	case w.err != nil:
		return time.Since(start), w.err
	}
	g.waiters.Remove(w.elem)
	return time.Since(start), err
}

// watchClient waits on the client's connection until the client leaves,
// the waiter is released, ctx ends or until passes; a release is read
// under the gate's lock after it.
func (w *waiter) watchClient(ctx context.Context, until time.Time) error {
	stop := context.AfterFunc(ctx, func() {
		w.stop.Store(true)
		w.watch.wake()
	})
	defer stop()
	switch {
	case w.watch.wait(until, &w.stop):
		return errClientGone
	case ctx.Err() != nil:
		return ctx.Err()
	case w.stop.Load():
		return nil
	}
	return errHold
}

// enterDefer counts a request being deferred toward maxHeld, until
// leaveDefer: errFull when maxHeld are held already, errShutdown once
// gpuguard is ending.
func (g *gate) enterDefer(maxHeld int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.shut:
		return errShutdown
	case g.waiters.Len()+g.deferring >= maxHeld:
		return errFull
	}
	g.deferring++
	return nil
}

func (g *gate) leaveDefer() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deferring--
}

// leave ends a request's time in flight.
func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	g.lastEnd = time.Now()
	if g.inflight == 0 {
		for _, c := range g.idle {
			close(c)
		}
		g.idle = nil
	}
}

// setOpen opens or closes the gate. Opening lets every waiting request
// through, oldest first.
func (g *gate) setOpen(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		return
	}
	g.open = open
	if !open {
		return
	}
	for e := g.waiters.Front(); e != nil; e = g.waiters.Front() {
		w := g.waiters.Remove(e).(*waiter)
		w.admitted = true
		g.inflight++
		w.release()
	}
}

// drained returns a channel closed once no request is in flight.
func (g *gate) drained() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := make(chan struct{})
	if g.inflight == 0 {
		close(c)
		return c
	}
	g.idle = append(g.idle, c)
	return c
}

// shutdown closes the gate for good: every waiting request gets
// errShutdown now, and new ones at once.
func (g *gate) shutdown() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shut, g.open = true, false
	for e := g.waiters.Front(); e != nil; e = g.waiters.Front() {
		w := g.waiters.Remove(e).(*waiter)
		w.err = errShutdown
		w.release()
	}
}

// held is how many requests the door holds now: waiting, or being
// deferred.
func (g *gate) held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiters.Len() + g.deferring
}
