package serve

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Door is the front door of one instance. Its control methods (Launched,
// Unready, Drain, Profile, Short, Configure) are safe to call from any
// goroutine; the supervisor calls them from its loop, so none blocks.
type Door struct {
	cfg   atomic.Pointer[conf]
	opts  Options
	gate  gate
	proxy *httputil.ReverseProxy
	tr    http.RoundTripper // to the child, for replays of deferred requests
	std   *http.Transport   // tr when the door built it (no Options.Transport)

	short atomic.Bool // memory is short: P1 to the fallback
	say   answers     // the door's own answers, and the profile every answer says (answer.go)

	up readiness // whether the current launch takes requests (health.go)

	srv *http.Server
}

// profileTag is what X-GPUGuard-Profile and X-GPUGuard-Level say.
type profileTag struct {
	name, level string
	next        string // the level past the ladder, for fallback answers
	// The same as header values, made once per profile change rather
	// than once per answer (stamp). An answer's header map takes them as
	// they are: the proxy copies values out of it, it never appends to
	// or writes into them.
	nameV, levelV, nextV, fallbackV []string
}

func newProfileTag(name, level, next string) *profileTag {
	return &profileTag{name: name, level: level, next: next,
		nameV: []string{name}, levelV: []string{level}, nextV: []string{next}, fallbackV: []string{"1"}}
}

// New returns a closed door: it holds every request until the first
// launch's health check passes.
func New(cfg Config, opts Options) *Door {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	d := &Door{opts: opts}
	d.Configure(cfg)
	d.say.meter = opts.Meter
	d.say.tag.Store(newProfileTag("", "0", "1"))
	tr := opts.Transport
	if tr == nil {
		d.std = newTransport()
		tr = d.std
	}
	d.tr = tr
	d.up.gate, d.up.onHealthy, d.up.logf = &d.gate, opts.OnHealthy, opts.Logf
	d.up.healthURL = func() string { c := d.cfg.Load(); return c.Upstream + c.Health }
	d.up.check = opts.Check
	if d.up.check == nil {
		hc := &http.Client{Transport: newHealthTransport(), Timeout: pollTimeout}
		d.up.check, d.up.fresh = httpCheck(hc), hc.CloseIdleConnections
	}
	d.proxy = &httputil.ReverseProxy{
		Rewrite:   d.rewrite,
		Transport: &retryTransport{d: d, base: tr},
		// 0: no flush timer for an answer of known length; the client's
		// writer (countingWriter) flushes each write itself, so every
		// byte still reaches the client as it comes, and a small answer
		// leaves in one write, headers and body together. ReverseProxy
		// still flushes headers at once for text/event-stream and for any
		// answer without a Content-Length (chunked: Ollama's NDJSON), as
		// -1 would for every answer, where it starts a timer goroutine
		// per answer that flushes the headers alone: one more write and
		// wake-up per request.
		FlushInterval:  0,
		BufferPool:     &bufferPool{},
		ErrorHandler:   d.proxyError,
		ModifyResponse: d.stamp,
		ErrorLog:       log.New(logWriter(opts.Logf), "", 0),
	}
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute,
		ConnContext: withClientConn}
	return d
}

// Configure applies a reloaded [serve] (everything but the address takes
// effect for the next request).
func (d *Door) Configure(cfg Config) {
	c := &conf{Config: cfg}
	// The policy has checked both; a URL that does not parse leaves the
	// target unset, and such a request gets 502.
	c.upstream, _ = url.Parse(cfg.Upstream)
	if cfg.Fallback != "" {
		c.fallback, _ = url.Parse(cfg.Fallback)
	}
	d.cfg.Store(c)
}

// conf is a Config with its URLs parsed once, not per request.
type conf struct {
	Config
	upstream, fallback *url.URL
}

// Launched says the child of launch gen has started: poll its health and
// open the gate at its first 2xx.
func (d *Door) Launched(gen int) { d.up.launched(gen) }

// Unready says the child is gone or about to be stopped: hold new
// requests and stop polling until the next launch.
func (d *Door) Unready() { d.up.unready() }

// Drain holds new requests (as Unready) and returns a channel that is
// closed once every request passed to the child has finished.
func (d *Door) Drain() <-chan struct{} {
	d.Unready()
	return d.gate.drained()
}

// Profile sets the profile that answers carry (X-GPUGuard-Profile and
// X-GPUGuard-Level).
func (d *Door) Profile(name string, level, levels int) { d.say.setProfile(name, level, levels) }

// Short says whether memory is short (a step down is pending, or the
// watermark is at or above high): P1 requests then go to the fallback.
func (d *Door) Short(short bool) { d.short.Store(short) }

// Ready reports whether the gate is open: the child answered its health
// check and no drain or exit has closed it since.
func (d *Door) Ready() bool { return d.up.ready.Load() }

// Held is how many requests the door holds now: waiting for a ready
// child, or being deferred (their bodies written to the store).
func (d *Door) Held() int { return d.gate.held() }

func (d *Door) logf(format string, args ...any) { d.opts.Logf(format, args...) }

// Listen binds addr for Serve: the caller binds it before anything else
// starts, so that an address in use is found with nothing started.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("front door listen address %q: %w", addr, err)
	}
	return ln, nil
}

// Serve answers clients on ln until Close. It returns nil after Close.
// Each connection is read through a clientConn, which checks every
// request's framing before net/http parses it.
func (d *Door) Serve(ln net.Listener) error {
	if err := d.srv.Serve(framedListener{ln}); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close ends the door: held requests get 503 at once, requests still in
// flight get until ctx ends to finish, and the health poller stops.
func (d *Door) Close(ctx context.Context) error {
	d.gate.shutdown()
	d.up.close()
	err := d.srv.Shutdown(ctx)
	if err != nil {
		err = d.srv.Close()
	}
	if d.std != nil {
		// The requests have ended (or were cut off): the kept connections
		// to the child go too, rather than wait for their idle timeout.
		d.std.CloseIdleConnections()
	}
	return err
}

// logWriter turns the proxy's log lines into Logf lines.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
