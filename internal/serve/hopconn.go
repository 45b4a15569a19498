package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"sync"
	"time"
)

// hopConn is one connection to the child.
type hopConn struct {
	t      *hopTransport
	key    string
	nc     *countingConn
	br     *bufio.Reader
	bw     *bufio.Writer
	reused bool // it has carried a request before this one
	timer  *time.Timer
	peek   peeker

	// guarded by t.mu
	idle   bool
	idleAt time.Time
}

// expire closes c once it has been idle for the idle timeout.
func (c *hopConn) expire() {
	t := c.t
	t.mu.Lock()
	if !c.idle || time.Since(c.idleAt) < t.idleTimeout {
		t.mu.Unlock()
		return
	}
	l := t.idle[c.key]
	for i, x := range l {
		if x == c {
			copy(l[i:], l[i+1:])
			l[len(l)-1] = nil
			t.idle[c.key] = l[:len(l)-1]
			break
		}
	}
	c.idle = false
	t.mu.Unlock()
	c.nc.Close()
}

// hopError is a failure before the answer's headers were read: written
// says whether any byte of the request reached the connection, read
// whether any byte came back.
type hopError struct {
	err           error
	written, read bool
}

func (e *hopError) Error() string {
	if !e.read {
		return "no byte answered: " + e.err.Error()
	}
	return "reading the answer's headers: " + e.err.Error()
}

func (e *hopError) Unwrap() error { return e.err }

// roundTrip writes req on c and reads its answer's headers. The request's
// context closes the connection when it ends, which stops a write or read
// in progress at once; the connection is then never kept.
func (c *hopConn) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	stop := context.AfterFunc(ctx, func() { c.nc.Close() })
	fail := func(err error, w0, r0 int64) error {
		stop()
		c.nc.Close()
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return &hopError{err: err, written: c.nc.written > w0, read: c.nc.read > r0}
	}
	w0, r0 := c.nc.written, c.nc.read
	err := req.Write(oneWrite{c.bw})
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return nil, fail(err, w0, r0)
	}
	resp, err := c.readResponse(req)
	if err != nil {
		return nil, fail(err, w0, r0)
	}
	keep := !resp.Close && !req.Close
	if resp.Body == http.NoBody || resp.Body == nil {
		c.done(stop, keep)
		return resp, nil
	}
	resp.Body = &hopBody{c: c, body: resp.Body, stop: stop, keep: keep}
	return resp, nil
}

// readResponse reads the final answer, passing informational ones (103
// Early Hints) to the proxy's trace, which forwards them to the client.
func (c *hopConn) readResponse(req *http.Request) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(req.Context())
	for n := 0; ; n++ {
		resp, err := http.ReadResponse(c.br, req)
		if err != nil {
			return nil, err
		}
		code := resp.StatusCode
		if code == http.StatusSwitchingProtocols {
			return nil, errors.New("an upgrade the request did not ask for")
		}
		if code >= 200 {
			return resp, nil
		}
		if n >= max1xx {
			return nil, fmt.Errorf("more than %d informational answers", max1xx)
		}
		if trace != nil && trace.Got1xxResponse != nil && code != http.StatusContinue {
			if err := trace.Got1xxResponse(code, textproto.MIMEHeader(resp.Header)); err != nil {
				return nil, err
			}
		}
	}
}

// done ends c's exchange: kept for the next request when the answer was
// read to its end, allows it, and the context did not close it meanwhile.
func (c *hopConn) done(stop func() bool, keep bool) {
	if stop() && keep && c.br.Buffered() == 0 {
		c.reused = false
		c.t.put(c)
		return
	}
	c.nc.Close()
}

// hopBody is an answer's body: read to its end, the connection goes back
// to the pool at once (the proxy's Close comes later and touches it no
// more); closed before its end, the connection is closed. The lock is
// not held over the read itself, so a Close from another goroutine does
// not wait for a blocked read: it closes the connection, which ends it.
type hopBody struct {
	c    *hopConn
	body io.ReadCloser
	stop func() bool
	keep bool

	mu     sync.Mutex
	end    bool // the connection is pooled or closed: no more reads of it
	closed bool // by Close
}

func (b *hopBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	end, closed := b.end, b.closed
	b.mu.Unlock()
	switch {
	case closed:
		return 0, http.ErrBodyReadAfterClose
	case end:
		return 0, io.EOF
	}
	n, err := b.body.Read(p)
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.end { // closed meanwhile
		return n, err
	}
	b.end = true
	if err == io.EOF {
		b.c.done(b.stop, b.keep)
	} else {
		b.stop()
		b.c.nc.Close()
	}
	return n, err
}

func (b *hopBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if !b.end {
		b.end = true
		b.stop()
		b.c.nc.Close()
	}
	return nil
}

// oneWrite is the connection's buffered writer under another type:
// Request.Write flushes the headers of a body it does not hold in memory
// (the client's) before the body when handed a *bufio.Writer itself, one
// more system call per request; the hop flushes once, after the body.
type oneWrite struct{ *bufio.Writer }

// countingConn counts the bytes written and read, so that a failure can
// say whether the request left and whether any answer came.
type countingConn struct {
	net.Conn
	written, read int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written += int64(n)
	return n, err
}
