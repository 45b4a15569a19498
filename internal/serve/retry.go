package serve

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// retryTransport sends a request to the child and, when its connection
// failed before any answer byte came back (refused, reset: the child
// died or was restarting), holds it and sends it once more to the next
// ready child, if that is safe: the child cannot have read it (the
// transport had not written it whole), or it may run twice (idempotent).
// A request the child may have read whole and run is not sent again: it
// gets 503 (errMayHaveRun). A stale kept connection is net/http's own to
// retry on a new one, by the same rule (Door.rewrite gives it GetBody).
// An answer already begun is never repeated: the transport has returned
// it, and a failure while its body streams ends the client's connection
// (the proxy aborts the handler).
type retryTransport struct {
	d    *Door
	base http.RoundTripper
}

// errMayHaveRun: the child dropped a request it may have read whole, and
// the request may not run twice (idempotent).
var errMayHaveRun = errors.New("the model server may have run the request before it dropped the connection")

// errNotReplayable: a body larger than the door keeps cannot be sent again.
var errNotReplayable = errors.New("the request body is too large to send again")

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchangeFrom(req.Context())
	if ex != nil && ex.whole != nil {
		// The proxy hides the body in a wrapper of its own, and with it
		// that the body is in memory: handed the bytes, the transport
		// writes the headers and the body in one write.
		in := *req
		in.Body, _ = ex.freshBody()
		req = &in
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil || ex == nil || ex.fallback {
		return resp, err
	}
	ctx := req.Context()
	cfg := t.d.cfg.Load()
	switch {
	case !cfg.Retry, ex.retried, ctx.Err() != nil, ex.timed.timedOut(), ex.answered.Load(), !ex.body.replayable():
		// Off, done once, the client left or its body stalled, an answer
		// had begun, or the body is gone.
		return nil, err
	}
	t.d.up.suspect(ex.gen)
	if ex.wrote.Load() && !idempotent(req) {
		ex.rejected = errMayHaveRun
		return nil, err
	}
	ex.retried = true
	t.d.leave(ex)
	if t.d.opts.Meter != nil {
		t.d.opts.Meter.ServeRetry()
	}
	// The body has been read (in part or whole) by now, so net/http sees
	// a client that leaves: no watch of the connection.
	if werr := t.d.enter(ctx, cfg, ex, nil); werr != nil {
		ex.rejected = werr
		return nil, werr
	}
	again := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		if again.Body, err = ex.freshBody(); err != nil {
			return nil, err
		}
	}
	return t.base.RoundTrip(again)
}

// idempotent reports whether req may run twice with the same effect as
// once (RFC 9110 9.2.2), or says it may (an Idempotency-Key).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	return ok
}

// replayBody keeps what the child has read of a request body, up to
// limit, so that the request can be sent again from its first byte. Each
// attempt reads through its own reader; once a newer attempt exists, an
// older one's reads fail (the transport may still hold it).
type replayBody struct {
	mu       sync.Mutex
	src      io.ReadCloser
	kept     []byte
	limit    int
	overflow bool // more than limit was read: no replay
	srcErr   error
	cur      int // the current attempt
}

var errStaleAttempt = errors.New("request body: a newer attempt is reading it")

// replayable reports whether the body can be sent again from the start
// (a nil body always can).
func (b *replayBody) replayable() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.overflow
}

// attempt is a reader of the whole body for one more sending.
func (b *replayBody) attempt() io.ReadCloser {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur++
	return &bodyAttempt{b: b, n: b.cur}
}

type bodyAttempt struct {
	b   *replayBody
	n   int
	off int
}

func (a *bodyAttempt) Read(p []byte) (int, error) {
	b := a.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if a.n != b.cur {
		return 0, errStaleAttempt
	}
	if a.off < len(b.kept) {
		n := copy(p, b.kept[a.off:])
		a.off += n
		return n, nil
	}
	if b.srcErr != nil {
		return 0, b.srcErr
	}
	n, err := b.src.Read(p)
	if n > 0 && !b.overflow {
		if len(b.kept)+n > b.limit {
			b.overflow, b.kept = true, nil
		} else {
			b.kept = append(b.kept, p[:n]...)
		}
	}
	a.off += n
	if err != nil {
		b.srcErr = err
	}
	return n, err
}

// Close does not close the client's body: the server does that when the
// handler returns, and a retry may still need it.
func (a *bodyAttempt) Close() error { return nil }
