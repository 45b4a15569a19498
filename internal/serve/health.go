package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// readiness is the door's knowledge of whether the child's current
// launch takes requests: that launch's health poller, the answers it
// gets, and the suspicion a failed request raises. It alone opens and
// closes the gate for a launch (Close shuts the gate itself). Requests
// read ready and the launch number without its lock; mu guards the
// launch's polling.
type readiness struct {
	gate      *gate
	check     func(ctx context.Context, url string) error
	fresh     func()        // the next check dials afresh (nil: checks keep nothing)
	healthURL func() string // read at each check: a reload may change it
	onHealthy func(gen int) // nil: nobody is told
	logf      func(string, ...any)

	ready  atomic.Bool  // the gate is open for the current launch
	genNow atomic.Int64 // gen, for requests to read without mu

	mu       sync.Mutex
	gen      int                // the current launch's number
	stopPoll context.CancelFunc // nil when not polling
	kick     chan struct{}      // ask the poller for a check now
	fails    int                // health failures in a row
	healthy  bool               // the current launch has answered 2xx
	polls    sync.WaitGroup
}

// launched starts polling the health of launch gen, in place of any
// launch polled before; its first 2xx opens the gate.
func (u *readiness) launched(gen int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stopLocked()
	u.gen, u.fails, u.healthy = gen, 0, false
	u.genNow.Store(int64(gen))
	ctx, cancel := context.WithCancel(context.Background())
	u.stopPoll, u.kick = cancel, make(chan struct{}, 1)
	u.polls.Add(1)
	go func(kick <-chan struct{}) {
		defer u.polls.Done()
		u.poll(ctx, gen, kick)
	}(u.kick)
}

// unready closes the gate and stops polling until the next launch.
func (u *readiness) unready() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stopLocked()
}

func (u *readiness) stopLocked() {
	if u.stopPoll != nil {
		u.stopPoll()
		u.stopPoll = nil
	}
	u.ready.Store(false)
	u.gate.setOpen(false)
	u.dropConnection() // the next launch's first check dials its child
}

// close stops polling for good and waits for the poller to return; the
// door's Close has shut the gate already (stopLocked's setOpen is a no-op
// on it).
func (u *readiness) close() {
	u.mu.Lock()
	u.stopLocked()
	u.mu.Unlock()
	u.polls.Wait()
	u.dropConnection() // the one a check in flight may have kept
}

// suspect closes the gate after a request found the child's connection
// failing (refused, reset): the child is dying or gone, so the next
// requests wait (rather than fail the same way) until a health check
// passes, which is asked for now.
func (u *readiness) suspect(gen int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if gen != u.gen || u.stopPoll == nil || !u.ready.Load() {
		return
	}
	u.logf("the child's connection failed: holding requests until its health check passes")
	u.ready.Store(false)
	u.gate.setOpen(false)
	u.fails = 0
	u.dropConnection()
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// dropConnection makes the next check dial afresh: a kept connection
// tells that the child still answers on it, a new one that it accepts
// connections now, which is what a check after a failure must tell.
func (u *readiness) dropConnection() {
	if u.fresh != nil {
		u.fresh()
	}
}

// current is the launch a request passing the gate now goes to. It is
// read on every request, so it takes no lock: launched stores it with gen.
func (u *readiness) current() int { return int(u.genNow.Load()) }

// poll checks the health of launch gen until ctx ends: every pollStarting
// while the child is not ready, every pollReady once it is. kick asks for
// a check now (a request found the child's connection refused).
func (u *readiness) poll(ctx context.Context, gen int, kick <-chan struct{}) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, pollTimeout)
		err := u.check(cctx, u.healthURL())
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			u.dropConnection()
		}
		ready, first := u.result(gen, err == nil)
		if first && u.onHealthy != nil {
			u.onHealthy(gen)
		}
		next := pollStarting
		if ready {
			next = pollReady
		}
		t.Reset(next)
	}
}

// result applies one health answer of launch gen: the first 2xx opens
// the gate (first reports that it was the launch's first), and failLimit
// failures in a row close it. A result for a launch that is no longer
// polled (the child exited, a drain began) changes nothing.
func (u *readiness) result(gen int, ok bool) (ready, first bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if gen != u.gen || u.stopPoll == nil {
		return false, false
	}
	if ok {
		u.fails = 0
		if !u.ready.Load() {
			u.ready.Store(true)
			u.gate.setOpen(true)
		}
		first = !u.healthy
		u.healthy = true
		return true, first
	}
	u.fails++
	if u.ready.Load() && u.fails >= failLimit {
		u.logf("the child failed %d health checks in a row: holding requests until it answers again", u.fails)
		u.ready.Store(false)
		u.gate.setOpen(false)
	}
	return u.ready.Load(), false
}

// httpCheck is the health request: GET url, any 2xx is healthy. The body
// is read (bounded) so the connection can be kept for the next check.
func httpCheck(client *http.Client) func(ctx context.Context, url string) error {
	return func(ctx context.Context, url string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			return fmt.Errorf("health check %s: status %d", url, resp.StatusCode)
		}
		return nil
	}
}
