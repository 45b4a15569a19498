package serve

import (
	"context"
	"net"
	"sync/atomic"
)

// framedListener hands net/http each client connection as a clientConn.
type framedListener struct{ net.Listener }

func (l framedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newClientConn(c), nil
}

// clientConn is a client's connection as net/http's server reads it. It
// passes every byte unchanged, but never more of a request's head than
// the head: it scans each head as it passes (headScan) and, before net/http
// parses it, knows the framing the head declared, Content-Length dropped
// for Transfer-Encoding included. Bytes read past a head's end wait in
// pend for the next read. To find where the next head starts it follows
// a body framed by Content-Length to its end. A chunked body it does not
// follow: the connection ends after that request's answer, so nothing
// after such a body is ever taken for a request (Door.ServeHTTP says
// Connection: close).
//
// The server reads it from one goroutine at a time; the handler reads a
// head's verdict from the goroutine that read the head.
type clientConn struct {
	net.Conn
	pend []byte // read from the connection, not passed yet

	state  readState
	remain int64 // body bytes left (readingBody)
	scan   headScan

	heads   int   // heads read so far
	verdict error // the last head's framing error (headScan.framing)
	chunked bool  // the last head declared Transfer-Encoding
	served  int   // requests the handler has checked (check)

	passThrough atomic.Bool // a protocol upgrade: the bytes are no longer HTTP/1
}

type readState int

const (
	readingHead readState = iota
	readingBody           // a body of known length: remain bytes
	readingRest           // everything to the end: a body not followed
)

func newClientConn(c net.Conn) *clientConn { return &clientConn{Conn: c} }

func (c *clientConn) Read(p []byte) (int, error) {
	if c.passThrough.Load() || c.state == readingRest {
		return c.read(p)
	}
	if c.state == readingBody {
		if int64(len(p)) > c.remain {
			p = p[:c.remain]
		}
		n, err := c.read(p)
		c.remain -= int64(n)
		if c.remain == 0 {
			c.state = readingHead
		}
		return n, err
	}
	// A head: up to its end.
	var n int
	var err error
	if len(c.pend) > 0 {
		n = c.scan.feed(c.pend[:min(len(c.pend), len(p))])
		copy(p, c.pend[:n])
		c.pend = c.pend[n:]
	} else {
		n, err = c.Conn.Read(p)
		if k := c.scan.feed(p[:n]); k < n {
			c.pend = append([]byte(nil), p[k:n]...)
			n = k
		}
	}
	if len(c.pend) == 0 {
		c.pend = nil
	}
	if c.scan.done {
		c.endHead()
	}
	return n, err
}

// read passes what waits in pend, then what the connection gives.
func (c *clientConn) read(p []byte) (int, error) {
	if len(c.pend) == 0 {
		return c.Conn.Read(p)
	}
	n := copy(p, c.pend)
	if c.pend = c.pend[n:]; len(c.pend) == 0 {
		c.pend = nil
	}
	return n, nil
}

// endHead notes a head's verdict and what follows it.
func (c *clientConn) endHead() {
	s := &c.scan
	c.heads++
	c.verdict, c.chunked = s.framing(), s.chunked
	switch {
	case c.verdict != nil || s.chunked:
		c.state = readingRest
	case s.length > 0:
		c.state, c.remain = readingBody, s.length
	default:
		c.state = readingHead
	}
	*s = headScan{}
}

// check is the framing verdict on the request whose handler calls it
// (once per request): nil, or why it is refused. A request whose head
// passed unseen (the count of heads and requests differs) is refused
// too: its framing cannot be vouched for. closeAfter says the
// connection must end after this request's answer.
func (c *clientConn) check() (closeAfter bool, err error) {
	c.served++
	switch {
	case c.served != c.heads:
		return true, errUnseenHead
	case c.verdict != nil:
		return true, c.verdict
	}
	return c.chunked, nil
}

// upgraded says the connection now carries another protocol (an answer
// 101): its bytes pass as they are.
func (c *clientConn) upgraded() { c.passThrough.Store(true) }

type clientConnKey struct{}

// withClientConn is the server's ConnContext: each request's context
// carries its connection.
func withClientConn(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*clientConn); ok {
		return context.WithValue(ctx, clientConnKey{}, cc)
	}
	return ctx
}

// clientConnFrom is the request's connection, or nil (a request that
// did not come through Serve: a test's recorder).
func clientConnFrom(ctx context.Context) *clientConn {
	cc, _ := ctx.Value(clientConnKey{}).(*clientConn)
	return cc
}
