package serve

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// The bounds on a request body's arrival (docs/serving.md, Framing):
// the default Config.BodyIdle and Config.BodyTotal.
const (
	bodyIdle  = 60 * time.Second
	bodyTotal = 10 * time.Minute
)

// errBodyTimeout ends a request body that stopped coming, or came too
// slowly in all: the client gets 408.
var errBodyTimeout = errors.New("the request body did not arrive in time")

// timedBody is a client's request body bounded in time: no byte for idle
// (counted from the last byte read, or the first read), or not all in by
// end, fails the read with errBodyTimeout. It sets the connection's read
// deadline before each read, so a silent client is cut off by the
// runtime's poller, with no timer or goroutine of its own. A read that
// reaches the end clears the deadline: net/http goes on reading the
// connection after a body, to see the client leave, and that read must
// not time out.
type timedBody struct {
	src     io.ReadCloser
	conn    *clientConn
	idle    time.Duration
	end     time.Time
	expired atomic.Bool // a read timed out: the answer is 408
}

func (b *timedBody) Read(p []byte) (int, error) {
	d := time.Now().Add(b.idle)
	if d.After(b.end) {
		d = b.end
	}
	_ = b.conn.SetReadDeadline(d)
	n, err := b.src.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		_ = b.conn.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.expired.Store(true)
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}

func (b *timedBody) Close() error { return b.src.Close() }

// timedOut reports whether the body's read timed out (false for none).
func (b *timedBody) timedOut() bool { return b != nil && b.expired.Load() }
