package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Request is one call: everything is given, nothing is defaulted here.
type Request struct {
	Method      string
	URL         string // absolute http:// URL with its query
	Body        string // "" = no body
	ContentType string // "" = no Content-Type header
	Header      map[string]string
	Timeout     time.Duration // > 0: the whole call, connection to answer
	Accept      []int         // statuses that count as success besides any 2xx
	Until       Until         // what to wait for once the call succeeded; zero: nothing
}

// Outcome is how a call went.
type Outcome struct {
	Status int           // the call's HTTP status; 0 when none came back
	Err    error         // nil exactly when the call succeeded and its until was met
	Took   time.Duration // from sending to the answer (and the until met) or the failure
}

// OK reports a success: a 2xx or accepted status, and the until met.
func (o Outcome) OK() bool { return o.Err == nil }

// Caller sends requests. Its zero value is not usable; use New.
type Caller struct {
	client *http.Client
}

// New returns a Caller with its own transport: no proxy from the
// environment (the upstream is a local server, and an HTTP_PROXY meant for
// downloads must not see its admin calls), no redirects followed (a 3xx is
// not a success), and no connection kept between calls, which are rare.
func New() *Caller {
	return newCaller(&http.Transport{
		Proxy:             nil,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableKeepAlives: true,
	})
}

// newCaller returns a Caller over rt (a test's in-memory server).
func newCaller(rt http.RoundTripper) *Caller {
	return &Caller{client: &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Do sends r and waits for its status line, at most r.Timeout (and no
// longer than ctx allows); the response body is closed unread. Once the
// call succeeded, it waits for r.Until, if set.
func (c *Caller) Do(ctx context.Context, r Request) Outcome {
	start := time.Now()
	o := c.call(ctx, r)
	if o.Err == nil && r.Until.Set() {
		o.Err = c.await(ctx, r.Until)
	}
	o.Took = time.Since(start)
	return o
}

// call sends r once and judges its status.
func (c *Caller) call(ctx context.Context, r Request) Outcome {
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	var body io.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return Outcome{Err: fmt.Errorf("build %s %s: %w", r.Method, r.URL, err)}
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.Timeout > 0 {
			return Outcome{Err: fmt.Errorf("no answer within %s: %w", r.Timeout, err)}
		}
		return Outcome{Err: fmt.Errorf("%s %s: %w", r.Method, r.URL, err)}
	}
	_ = resp.Body.Close()
	if !success(resp.StatusCode, r.Accept) {
		return Outcome{Status: resp.StatusCode, Err: fmt.Errorf("answered %s", resp.Status)}
	}
	return Outcome{Status: resp.StatusCode}
}

// success reports a 2xx status or one listed in accept.
func success(status int, accept []int) bool {
	return status >= 200 && status <= 299 || slices.Contains(accept, status)
}
