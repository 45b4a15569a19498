package door

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Options configure a Door.
type Options struct {
	// Table is the current routing table (Watcher.Table).
	Table func() *Table
	// MaxBody bounds a body read to find its model; larger gets 413.
	MaxBody int64
	// Version is gpuguard's version, for GET /api/version.
	Version string
	// Metrics, when set, counts every request.
	Metrics *Metrics
	// Logf gets what the proxy has to say (an answer cut off mid-way).
	Logf func(format string, args ...any)
}

// Door is the http.Handler of `gpuguard door`.
type Door struct {
	o           Options
	tr          *http.Transport
	proxy       *httputil.ReverseProxy
	bodyTimeout time.Duration // bodyTimeout; shorter in tests
}

// dialTimeout bounds the connection to an instance's front door: one that
// does not accept within it is not answering (503).
const dialTimeout = time.Second

// New returns the door's handler.
func New(o Options) *Door {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	d := &Door{o: o, bodyTimeout: bodyTimeout}
	// One transport for every instance: kept-alive connections, plenty of
	// them per instance (a held request keeps its connection busy while
	// the instance wakes), no proxy from the environment (the instances
	// are local), and no compression of its own: the client's
	// Accept-Encoding reaches the server as sent.
	d.tr = &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
	d.proxy = &httputil.ReverseProxy{
		Rewrite:        d.rewrite,
		Transport:      d.tr,
		ModifyResponse: stamp,
		ErrorHandler:   d.failed,
		BufferPool:     newBufferPool(),
		ErrorLog:       log.New(logWriter(o.Logf), "", 0),
		// FlushInterval 0: ReverseProxy flushes every write of an answer
		// of unknown length (NDJSON, chunked) and of any text/event-stream
		// at once, and writes an answer of known length in one piece.
	}
	return d
}

// CloseIdleConnections closes the kept connections to the instances.
func (d *Door) CloseIdleConnections() { d.tr.CloseIdleConnections() }

// route is where one request goes: the instance, and for /upstream/ the
// path to send instead of the request's.
type route struct {
	b             *Backend
	path, rawPath string
	upstream      bool
	read          bool // the body was read here: the client's Expect is answered
}

type routeKey struct{}

// ServeHTTP routes one request, and counts it.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w}
	model := d.serve(rec, r)
	if d.o.Metrics != nil {
		var first time.Duration
		if !rec.first.IsZero() {
			first = rec.first.Sub(start)
		}
		d.o.Metrics.observe(model, rec.status(), first)
	}
}

// serve answers r and returns its model label: a declared name, or
// unknownModel.
func (d *Door) serve(w http.ResponseWriter, r *http.Request) string {
	t := d.o.Table()
	switch {
	case isListing(r):
		return d.list(w, r, t)
	case strings.HasPrefix(r.URL.Path, UpstreamPrefix):
		return d.byPath(w, r, t)
	default:
		return d.byBody(w, r, t)
	}
}

// byBody routes by the model the JSON body names.
func (d *Door) byBody(w http.ResponseWriter, r *http.Request, t *Table) string {
	body, err := readBody(w, r, d.o.MaxBody, d.bodyTimeout)
	switch {
	case errors.Is(err, errTooLarge):
		bodyTooLarge(w, d.o.MaxBody)
		return unknownModel
	case errors.Is(err, os.ErrDeadlineExceeded):
		bodyTimedOut(w, d.bodyTimeout)
		return unknownModel
	case err != nil:
		invalidJSON(w, fmt.Errorf("reading it: %w", err))
		return unknownModel
	case len(body) == 0:
		modelRequired(w, "The request has no body")
		return unknownModel
	}
	n, err := bodyModel(body)
	switch {
	case errors.Is(err, errNotJSON):
		invalidJSON(w, err)
		return unknownModel
	case err != nil:
		modelRequired(w, `The body has no "model" string`)
		return unknownModel
	}
	b := t.Pick(n.model)
	if b == nil {
		modelNotFound(w, n.model)
		return unknownModel
	}
	if n.model != b.Models[0] {
		body = rewrite(body, n, b.quoted)
	}
	d.forward(w, r, &route{b: b, read: true}, body)
	return n.model
}

// byPath routes /upstream/MODEL/PATH: PATH goes to MODEL's instance, the
// body streamed as it comes.
func (d *Door) byPath(w http.ResponseWriter, r *http.Request, t *Table) string {
	model, rest, ok := t.Upstream(r.URL.EscapedPath())
	switch {
	case model == "":
		modelRequired(w, "The path names no model after "+UpstreamPrefix)
		return unknownModel
	case !ok:
		modelNotFound(w, model)
		return unknownModel
	}
	p, err := url.PathUnescape(rest)
	if err != nil {
		p = rest
	}
	d.forward(w, r, &route{b: t.Pick(model), path: p, rawPath: rest, upstream: true}, nil)
	return model
}

// forward passes r (with body, when it was read) to the route's instance.
func (d *Door) forward(w http.ResponseWriter, r *http.Request, rt *route, body []byte) {
	if rt.b.Unreachable() {
		unavailable(w, fmt.Sprintf("The gpuguard instance %q does not answer on its control socket (%s); retry shortly.", rt.b.Name, rt.b.Status.Error))
		return
	}
	out := r.WithContext(context.WithValue(r.Context(), routeKey{}, rt))
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.TransferEncoding = nil
	}
	rt.b.inFlight.Add(1)
	defer rt.b.inFlight.Add(-1)
	d.proxy.ServeHTTP(w, out)
}

// rewrite aims the outgoing request at the instance's front door. Method,
// path, query, headers and body stay the client's (but for an alias
// rewritten in the body, and the path of /upstream/); the client's
// X-Forwarded-* headers are kept, its address appended to
// X-Forwarded-For.
func (d *Door) rewrite(pr *httputil.ProxyRequest) {
	rt := pr.In.Context().Value(routeKey{}).(*route)
	u := pr.Out.URL
	u.Scheme, u.Host = "http", rt.b.Addr
	if rt.upstream {
		u.Path, u.RawPath = rt.path, rt.rawPath
	}
	pr.Out.Host = pr.In.Host
	h := pr.Out.Header
	if rt.read {
		// The door read the body whole (answering the client's
		// 100-continue); the instance gets it at once.
		h.Del("Expect")
	}
	if v := pr.In.Header["X-Forwarded-For"]; v != nil {
		h["X-Forwarded-For"] = v
	}
	pr.SetXForwarded()
	for _, k := range [...]string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v := pr.In.Header[k]; v != nil {
			h[k] = v
		}
	}
}

// stamp names the instance that answered.
func stamp(resp *http.Response) error {
	rt := resp.Request.Context().Value(routeKey{}).(*route)
	resp.Header.Set(HeaderInstance, rt.b.Name)
	return nil
}

// failed answers a request whose instance could not be reached (its door
// refused the connection, or did not accept it within dialTimeout) or
// dropped it before answering: 503 with Retry-After, as the instance's
// own door answers when it cannot hold a request. A client that left gets
// nothing.
func (d *Door) failed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	rt := r.Context().Value(routeKey{}).(*route)
	unavailable(w, fmt.Sprintf("The gpuguard instance %q did not answer at %s: %v; retry shortly.", rt.b.Name, rt.b.Addr, err))
}

var errTooLarge = errors.New("body too large")

// bodyTimeout bounds reading a body to find its model: a client that
// trickles it holds a goroutine and what it sent, not the door.
const bodyTimeout = 10 * time.Minute

// readBody reads r's body whole, up to limit bytes and within timeout.
// Memory follows what arrives: a Content-Length is a hint up to 64 KiB,
// never an allocation of its whole claim.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, errTooLarge
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(timeout)) == nil {
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	if r.ContentLength >= 0 && r.ContentLength <= 64<<10 {
		buf := make([]byte, r.ContentLength)
		_, err := io.ReadFull(r.Body, buf)
		return buf, err
	}
	var buf bytes.Buffer
	buf.Grow(64 << 10)
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if int64(buf.Len()) > limit {
		return nil, errTooLarge
	}
	return buf.Bytes(), err
}

// recorder remembers the status sent and when the first byte went, for
// the metrics. Unwrap lets http.ResponseController (the proxy's flushes)
// reach the connection's own writer.
type recorder struct {
	http.ResponseWriter
	code  int
	first time.Time
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 {
		r.code, r.first = code, time.Now()
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code, r.first = http.StatusOK, time.Now()
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// status is the code sent, or 499 when the client left before any.
func (r *recorder) status() int {
	if r.code == 0 {
		return 499
	}
	return r.code
}

// bufferPool lends the proxy its copy buffers, so that passing an answer
// allocates none.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (p *bufferPool) Get() []byte  { return *p.p.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.p.Put(&b) }

// logWriter turns the proxy's log lines into Logf lines, but for those
// saying a client left mid-answer (a stream stopped by its user is no
// news).
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	if line := strings.TrimRight(string(p), "\n"); !strings.Contains(line, context.Canceled.Error()) {
		f("%s", line)
	}
	return len(p), nil
}
