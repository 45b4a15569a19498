package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Replay sends a deferred request (a task of tool http) to the child and
// answers its response to keep: the supervisor calls it once memory is
// no longer short, the child is ready and the window is open. A 5xx, no
// answer, or a response body over 16 MiB is an error: the attempt failed
// (backoff, max_attempts). It passes the gate without waiting there: a
// closed gate (the child not ready, a drain) fails the attempt at once,
// since a held replay would only hold the queue; an open one counts it in
// flight, so that a drain before a planned restart waits for it.
func (d *Door) Replay(ctx context.Context, payload json.RawMessage) ([]byte, error) {
	var req deferredRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("the deferred request does not parse: %w", err)
	}
	cfg := d.cfg.Load()
	if cfg.upstream == nil {
		return nil, fmt.Errorf("the upstream URL %q is invalid", cfg.Upstream)
	}
	u := *cfg.upstream
	u.Path, u.RawPath, u.RawQuery = u.Path+req.Path, "", req.Query
	out, err := http.NewRequestWithContext(ctx, req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("the deferred request: %w", err)
	}
	out.Header = endToEnd(req.Header)
	if out.Header == nil {
		out.Header = http.Header{}
	}
	if _, err := d.gate.enter(ctx, 0, 1); err != nil {
		return nil, fmt.Errorf("the model server is not ready (%w)", err)
	}
	defer d.gate.leave()
	resp, err := d.tr.RoundTrip(out)
	if err != nil {
		return nil, fmt.Errorf("the model server did not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 500 {
		return nil, fmt.Errorf("the model server answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDeferred+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("reading the model server's answer: %w", err)
	case len(body) > maxDeferred:
		return nil, fmt.Errorf("the model server's answer is over %d bytes", maxDeferred)
	}
	return json.Marshal(deferredResponse{Status: resp.StatusCode, Header: endToEnd(resp.Header), Body: body})
}
