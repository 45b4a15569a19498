package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
}

// Outcome is how a call went.
type Outcome struct {
	Status int           // the HTTP status; 0 when none came back
	Err    error         // nil exactly when Status is 2xx
	Took   time.Duration // from sending to the answer's status line or the failure
}

// OK reports a 2xx answer.
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
	tr := &http.Transport{
		Proxy:             nil,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableKeepAlives: true,
	}
	return &Caller{client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Do sends r and waits for its status line, at most r.Timeout (and no
// longer than ctx allows). The response body is closed unread.
func (c *Caller) Do(ctx context.Context, r Request) Outcome {
	start := time.Now()
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
		return Outcome{Err: fmt.Errorf("build %s %s: %w", r.Method, r.URL, err), Took: time.Since(start)}
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	resp, err := c.client.Do(req)
	took := time.Since(start)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.Timeout > 0 {
			return Outcome{Err: fmt.Errorf("no answer within %s: %w", r.Timeout, err), Took: took}
		}
		return Outcome{Err: fmt.Errorf("%s %s: %w", r.Method, r.URL, err), Took: took}
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Outcome{Status: resp.StatusCode, Err: fmt.Errorf("answered %s", resp.Status), Took: took}
	}
	return Outcome{Status: resp.StatusCode, Took: took}
}
