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
// runtime's poller, with no timer or goroutine of its own. Once the body
// has ended it sets none: net/http then reads the connection itself, to
// see the client leave (its background read, which clears the deadline as
// it starts), and that read must not time out. Reads come one at a time.
type timedBody struct {
	src     io.ReadCloser
	conn    *clientConn
	idle    time.Duration
	end     time.Time
	ended   bool        // the body's end or an error was read
	expired atomic.Bool // a read timed out: the answer is 408
}

func (b *timedBody) Read(p []byte) (int, error) {
	if b.ended {
		return b.src.Read(p)
	}
	d := time.Now().Add(b.idle)
	if d.After(b.end) {
		d = b.end
	}
	_ = b.conn.SetReadDeadline(d)
	n, err := b.src.Read(p)
	if err != nil {
		b.ended = true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		b.expired.Store(true)
		err = fmt.Errorf("%w: %w", errBodyTimeout, err)
	}
	return n, err
}

func (b *timedBody) Close() error { return b.src.Close() }

// timedOut reports whether the body's read timed out (false for a body
// never bounded: the zero value).
func (b *timedBody) timedOut() bool { return b.expired.Load() }
