package serve

import (
	"errors"
	"io"
	"net/http"
	"sync"
)

// retryTransport sends a request to the child and, when the connection
// failed before any response byte came back (refused, reset: the child
// died or was restarting), holds it and sends it once more to the next
// ready child. A response already begun is never repeated: the transport
// has returned it, and a failure while its body streams ends the client's
// connection (the proxy aborts the handler).
type retryTransport struct {
	d    *Door
	base http.RoundTripper
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ex := exchangeFrom(req.Context())
	resp, err := t.base.RoundTrip(req)
	if err == nil || ex == nil || ex.fallback {
		return resp, err
	}
	ctx := req.Context()
	cfg := t.d.cfg.Load()
	if !cfg.Retry || ex.retried || ctx.Err() != nil || !ex.body.replayable() {
		return nil, err
	}
	ex.retried = true
	t.d.leave(ex)
	t.d.up.suspect(ex.gen)
	if t.d.opts.Meter != nil {
		t.d.opts.Meter.ServeRetry()
	}
	if werr := t.d.enter(ctx, cfg, ex); werr != nil {
		ex.rejected = werr
		return nil, werr
	}
	again := req.Clone(ctx)
	if ex.body != nil {
		again.Body = ex.body.attempt()
	}
	return t.base.RoundTrip(again)
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
