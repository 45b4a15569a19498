package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"
)

// exchange is one client request's passage through the door, carried in
// the outbound request's context to the transport and the error handler.
type exchange struct {
	target   *url.URL
	fallback bool
	gen      int  // the launch it was sent to
	inflight bool // counted in the gate
	body     *replayBody
	retried  bool  // sent a second time
	rejected error // a retry's wait ended without a ready child, or it may not be sent again

	// What the transport did with the last attempt (its trace): whether
	// the request was written whole, whether an answer byte came back,
	// and the connection it went on.
	trace    httptrace.ClientTrace
	wrote    atomic.Bool
	answered atomic.Bool
	child    atomic.Pointer[childConn]

	whole []byte // the body, read whole before sending (maxBuffered)

	// The request's writer, kept body and timed body live here, so that
	// a request costs the door few allocations of its own.
	w     countingWriter
	kept  replayBody
	timed timedBody // the zero value: no body, or no connection to bound it by
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// bound bounds r's body in time (timedBody, from start) and answers how
// to watch its client while the request is held: nothing reads a held
// request's body, so net/http cannot see its client leave, and the gate
// watches the connection. Without a body, or a connection to bound it by,
// there is nothing to do (and net/http watches a bodiless request's
// client itself).
func (ex *exchange) bound(r *http.Request, cc *clientConn, cfg *conf, start time.Time) watcher {
	if cc == nil || r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	ex.timed = timedBody{src: r.Body, conn: cc, idle: cfg.bodyIdle(), end: start.Add(cfg.bodyTotal())}
	r.Body = &ex.timed
	return cc.watcher()
}

// pass sends r to ex's target through the proxy, with ex and its trace
// in the request's context.
func (d *Door) pass(w http.ResponseWriter, r *http.Request, ex *exchange) {
	ex.trace = httptrace.ClientTrace{GotConn: ex.gotConn, WroteRequest: ex.wroteRequest, GotFirstResponseByte: ex.gotFirstByte}
	ctx := httptrace.WithClientTrace(context.WithValue(r.Context(), exchangeKey{}, ex), &ex.trace)
	d.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// gotConn starts an attempt on a connection: nothing of it written yet,
// and the connection's next bytes are its answer.
func (ex *exchange) gotConn(info httptrace.GotConnInfo) {
	ex.wrote.Store(false)
	if c, ok := info.Conn.(*childConn); ok {
		c.expect()
		ex.child.Store(c)
	}
}

func (ex *exchange) wroteRequest(info httptrace.WroteRequestInfo) {
	if info.Err == nil {
		ex.wrote.Store(true)
	}
}

func (ex *exchange) gotFirstByte() { ex.answered.Store(true) }

// freshBody is the request's body from its start, for one more sending:
// the outbound request's GetBody (net/http's transport sends a request
// again on a new connection when a kept one failed before the request
// could have been read) and the door's own retry.
func (ex *exchange) freshBody() (io.ReadCloser, error) {
	switch {
	case ex.whole != nil:
		// A *bytes.Reader: net/http writes the headers and a body it
		// knows to be in memory together.
		return io.NopCloser(bytes.NewReader(ex.whole)), nil
	case ex.body == nil:
		return http.NoBody, nil
	case !ex.body.replayable():
		return nil, errNotReplayable
	}
	return ex.body.attempt(), nil
}

// readWhole reads a body of n bytes. Its buffer grows as the bytes come,
// from one that holds a usual prompt: a client that declares a length and
// sends nothing costs no more than that.
func readWhole(body io.Reader, n int64) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(int(min(n, 4<<10)))
	if _, err := io.CopyN(&b, body, n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
