package serve

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// hopTransport is the door's HTTP/1.1 client to the child. The handler's
// goroutine writes the request and reads the answer itself, on a pooled
// keep-alive connection: http.Transport hands each request to a writing
// goroutine and each answer back from a reading one, two goroutine
// switches and their channel operations per request, which were most of
// what the door's hop cost beyond its system calls (docs/performance.md,
// the front door). What it does not do plainly goes to std, the stdlib
// Transport, unchanged (lean says which).
type hopTransport struct {
	std         *http.Transport
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	maxIdle     int           // idle connections kept per host:port
	idleTimeout time.Duration // an idle connection older than this is closed

	mu   sync.Mutex
	idle map[string][]*hopConn // per host:port, the most recent last (LIFO)
}

// maxInlineBody bounds a request body the handler writes before it reads
// the answer. A larger one, or one of unknown length, goes through std,
// which writes the body while it reads the answer: a child that answers
// before it has read the whole body (an early 413, an echo) cannot stall
// a request whose body outgrows the sockets' buffers.
const maxInlineBody = 1 << 20

// max1xx bounds the informational answers skipped before the final one,
// as http.Transport does.
const max1xx = 5

func newHopTransport(std *http.Transport) *hopTransport {
	return &hopTransport{
		std:         std,
		dial:        (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		maxIdle:     std.MaxIdleConnsPerHost,
		idleTimeout: std.IdleConnTimeout,
		idle:        map[string][]*hopConn{},
	}
}

// lean reports whether the hop sends req itself: plain http, no protocol
// upgrade, no Expect, no request trailers, and a body of known length up
// to maxInlineBody (or none).
func lean(req *http.Request) bool {
	if req.URL.Scheme != "http" || req.Method == http.MethodConnect || len(req.Trailer) > 0 {
		return false
	}
	h := req.Header
	if _, ok := h["Upgrade"]; ok {
		return false
	}
	if _, ok := h["Connection"]; ok { // the proxy sets it only for an upgrade
		return false
	}
	if _, ok := h["Expect"]; ok {
		return false
	}
	if req.Body == nil || req.Body == http.NoBody {
		return true
	}
	return req.ContentLength > 0 && req.ContentLength <= maxInlineBody
}

func (t *hopTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !lean(req) {
		return t.std.RoundTrip(req)
	}
	key := hostPort(req.URL)
	for {
		c, err := t.conn(req.Context(), key)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(req)
		if err == nil {
			return resp, nil
		}
		var he *hopError
		if !errors.As(err, &he) || !c.reused || !retrySafe(req, he) {
			return nil, err
		}
		// The child had closed this kept connection before it took the
		// request: send it on another, as http.Transport does. A fresh
		// connection is never retried here, so the loop ends.
		if req.GetBody != nil && req.Body != nil && req.Body != http.NoBody {
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
}

// retrySafe is http.Transport's rule for sending a request again on a
// new connection after a kept one failed: nothing of it was written, or
// nothing was read back and the request may be repeated (an idempotent
// method or an Idempotency-Key) with its body to send again. Anything
// else is the retryTransport's to decide (serve/retry.go).
func retrySafe(req *http.Request, he *hopError) bool {
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	if !replayable || he.read {
		return false
	}
	if !he.written {
		return true
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// hostPort is the pool's key: the URL's host with its port.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// conn is a kept connection to key that is still open, or a new one.
func (t *hopTransport) conn(ctx context.Context, key string) (*hopConn, error) {
	for {
		t.mu.Lock()
		l := t.idle[key]
		if len(l) == 0 {
			t.mu.Unlock()
			break
		}
		c := l[len(l)-1]
		l[len(l)-1] = nil
		t.idle[key] = l[:len(l)-1]
		c.idle = false
		t.mu.Unlock()
		c.timer.Stop()
		if c.alive() {
			c.reused = true
			return c, nil
		}
		c.nc.Close()
	}
	nc, err := t.dial(ctx, "tcp", key)
	if err != nil {
		return nil, err
	}
	c := &hopConn{t: t, key: key, nc: &countingConn{Conn: nc}}
	c.br = bufio.NewReaderSize(c.nc, 4<<10)
	c.bw = bufio.NewWriterSize(c.nc, 4<<10)
	c.timer = time.AfterFunc(time.Hour, c.expire)
	c.timer.Stop()
	c.initAlive()
	return c, nil
}

// put keeps c for the next request to its host, or closes it when the
// pool for that host is full.
func (t *hopTransport) put(c *hopConn) {
	t.mu.Lock()
	l := t.idle[c.key]
	if len(l) >= t.maxIdle {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	c.idle, c.idleAt = true, time.Now()
	t.idle[c.key] = append(l, c)
	t.mu.Unlock()
	c.timer.Reset(t.idleTimeout)
}

// CloseIdleConnections closes every kept connection, the hop's and std's
// (the door's Close).
func (t *hopTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[string][]*hopConn{}
	for _, l := range idle {
		for _, c := range l {
			c.idle = false
		}
	}
	t.mu.Unlock()
	for _, l := range idle {
		for _, c := range l {
			c.timer.Stop()
			c.nc.Close()
		}
	}
	t.std.CloseIdleConnections()
}

// idleLen is how many connections to key are kept now (for tests).
func (t *hopTransport) idleLen(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle[key])
}
