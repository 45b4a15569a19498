package metrics

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Endpoint serves a handler at /metrics on one address at a time, and
// moves when a policy reload changes [metrics] listen. A move is two steps
// so that a reload can be refused with nothing changed: Prepare binds the
// new address first (a port in use is an error, and the old address keeps
// serving), then Commit serves there and stops the old server, or Abort
// lets the new address go.
type Endpoint struct {
	handler http.Handler

	mu     sync.Mutex
	addr   string             // "" when not serving
	stop   context.CancelFunc // ends the current server; nil when none
	closed bool
	wg     sync.WaitGroup // servers not yet shut down
}

// NewEndpoint returns an Endpoint that serves nothing until a Move to an
// address is committed.
func NewEndpoint(h http.Handler) *Endpoint { return &Endpoint{handler: h} }

// Addr is the address served now ("" when none).
func (e *Endpoint) Addr() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.addr
}

// Move is a prepared change of address.
type Move struct {
	e    *Endpoint
	addr string
	ln   net.Listener // nil for "" (stop serving)
	once sync.Once
}

// Prepare binds addr ("" stops serving at Commit) without changing what is
// served. Exactly one of Commit and Abort must follow; calling either again
// does nothing, so `defer m.Abort()` is safe after a Commit.
func (e *Endpoint) Prepare(addr string) (*Move, error) {
	m := &Move{e: e, addr: addr}
	if addr == "" {
		return m, nil
	}
	ln, err := Listen(addr)
	if err != nil {
		return nil, err
	}
	m.ln = ln
	return m, nil
}

// Commit serves on the prepared address and stops serving on the old one
// (an in-flight scrape there may finish). It returns at once.
func (m *Move) Commit() {
	m.once.Do(func() {
		e := m.e
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.stop != nil {
			e.stop()
			e.stop = nil
		}
		e.addr = ""
		if m.ln == nil {
			return
		}
		if e.closed {
			m.ln.Close()
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		e.stop, e.addr = cancel, m.addr
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			_ = Serve(ctx, m.ln, e.handler)
		}()
	})
}

// Abort closes the prepared address (unless Commit came first).
func (m *Move) Abort() {
	m.once.Do(func() {
		if m.ln != nil {
			m.ln.Close()
		}
	})
}

// Close stops serving and waits for the servers to shut down (in-flight
// scrapes are given a moment, as Serve does).
func (e *Endpoint) Close() {
	e.mu.Lock()
	e.closed = true
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
	e.addr = ""
	e.mu.Unlock()
	e.wg.Wait()
}
