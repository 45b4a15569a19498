package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Replay sends a deferred request (a task of tool http) to the child:
// payload, and body of size bytes as the store reads it back. It answers
// the response's status and headers to keep (result) and its body to
// read (answer, at most 16 MiB, then an error), which the caller streams
// into the store and must close. The supervisor calls it once memory is
// no longer short, the child is ready and the window is open. A 5xx, no
// answer, or a response body over 16 MiB is an error: the attempt failed
// (backoff, max_attempts). It passes the gate without waiting there: a
// closed gate (the child not ready, a drain) fails the attempt at once,
// since a held replay would only hold the queue; an open one counts it in
// flight until answer is closed, so that a drain before a planned
// restart waits for it.
func (d *Door) Replay(ctx context.Context, payload json.RawMessage, body io.Reader, size int64) (result []byte, answer io.ReadCloser, err error) {
	var req deferredRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, nil, fmt.Errorf("the deferred request does not parse: %w", err)
	}
	if len(req.Body) > 0 { // stored before bodies were kept apart
		body, size = bytes.NewReader(req.Body), int64(len(req.Body))
	}
	cfg := d.cfg.Load()
	if cfg.upstream == nil {
		return nil, nil, fmt.Errorf("the upstream URL %q is invalid", cfg.Upstream)
	}
	u := *cfg.upstream
	u.Path, u.RawPath, u.RawQuery = u.Path+req.Path, "", req.Query
	out, err := http.NewRequestWithContext(ctx, req.Method, u.String(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("the deferred request: %w", err)
	}
	if size > 0 {
		// The store's reader stays the caller's to close: the transport
		// may still read it after the answer has begun.
		out.Body, out.ContentLength = io.NopCloser(body), size
	}
	out.Header = endToEnd(req.Header)
	if out.Header == nil {
		out.Header = http.Header{}
	}
	if _, err := d.gate.enter(ctx, 0, 1); err != nil {
		return nil, nil, fmt.Errorf("the model server is not ready (%w)", err)
	}
	resp, err := d.tr.RoundTrip(out)
	if err != nil {
		d.gate.leave()
		return nil, nil, fmt.Errorf("the model server did not answer: %w", err)
	}
	if resp.StatusCode >= 500 {
		resp.Body.Close()
		d.gate.leave()
		return nil, nil, fmt.Errorf("the model server answered %s", resp.Status)
	}
	result, err = json.Marshal(deferredResponse{Status: resp.StatusCode, Header: endToEnd(resp.Header)})
	if err != nil {
		resp.Body.Close()
		d.gate.leave()
		return nil, nil, fmt.Errorf("encoding the model server's answer: %w", err)
	}
	return result, &replayAnswer{body: resp.Body, leave: d.gate.leave}, nil
}

// replayAnswer is a replay's response body: at most maxDeferred bytes (a
// truncated answer is no answer), its request in flight until Close.
type replayAnswer struct {
	body  io.ReadCloser
	n     int64
	once  sync.Once
	leave func()
}

func (a *replayAnswer) Read(p []byte) (int, error) {
	if room := maxDeferred + 1 - a.n; int64(len(p)) > room {
		p = p[:room]
	}
	k, err := a.body.Read(p)
	a.n += int64(k)
	if a.n > maxDeferred {
		return k, fmt.Errorf("the model server's answer is over %d bytes", maxDeferred)
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("reading the model server's answer: %w", err)
	}
	return k, err
}

func (a *replayAnswer) Close() error {
	err := a.body.Close()
	a.once.Do(a.leave)
	return err
}
