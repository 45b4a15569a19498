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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Door is the front door of one instance. Its control methods (Launched,
// Unready, Drain, Profile, Short, Configure) are safe to call from any
// goroutine; the supervisor calls them from its loop, so none blocks.
type Door struct {
	cfg   atomic.Pointer[conf]
	opts  Options
	check func(ctx context.Context, url string) error
	gate  gate
	proxy *httputil.ReverseProxy
	tr    http.RoundTripper // to the child, for replays of deferred requests
	hop   *hopTransport     // tr when the door built it (no Options.Transport)

	ready atomic.Bool // the gate is open for the current launch
	short atomic.Bool // memory is short: P1 to the fallback
	tag   atomic.Pointer[profileTag]

	// mu guards the current launch's polling.
	mu       sync.Mutex
	gen      int                // the current launch's number
	genNow   atomic.Int64       // gen, for requests to read without mu
	stopPoll context.CancelFunc // nil when not polling
	kick     chan struct{}      // ask the poller for a check now
	fails    int                // health failures in a row
	healthy  bool               // the current launch has answered 2xx
	polls    sync.WaitGroup

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
	d.tag.Store(newProfileTag("", "0", "1"))
	tr := opts.Transport
	if tr == nil {
		d.hop = newHopTransport(newTransport())
		tr = d.hop
	}
	d.tr = tr
	d.check = opts.Check
	if d.check == nil {
		d.check = httpCheck(&http.Client{Transport: newHealthTransport(), Timeout: pollTimeout})
	}
	d.proxy = &httputil.ReverseProxy{
		Rewrite:   d.rewrite,
		Transport: &retryTransport{d: d, base: tr},
		// 0: no flush timer for an answer of known length; the client's
		// writer (countingWriter) flushes each write itself, so every
		// byte still reaches the client as it comes, and a small answer
		// leaves in one write, headers and body together. ReverseProxy
		// still flushes headers at once for text/event-stream and for any
		// answer without a Content-Length (chunked: Ollama's NDJSON). -1
		// started a timer goroutine per answer that flushed its headers
		// alone: one more write and wake-up per request.
		FlushInterval:  0,
		BufferPool:     &bufferPool{},
		ErrorHandler:   d.proxyError,
		ModifyResponse: d.stamp,
		ErrorLog:       log.New(logWriter(opts.Logf), "", 0),
	}
	d.srv = &http.Server{Handler: d, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute}
	return d
}

// newTransport reaches the child for what the hop does not send itself
// (hopTransport: upgrades, Expect, large or unknown-length bodies,
// https), and sets the hop's pool limits: keep-alive connections enough for many
// concurrent clients, no compression of its own (bodies pass as they
// are), and no response timeout (a generation may take minutes).
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
}

// newHealthTransport opens a connection per check, so a check tells
// whether the child accepts connections now, not whether an old one lives.
func newHealthTransport() *http.Transport {
	return &http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: pollTimeout}).DialContext}
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
func (d *Door) Launched(gen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopPollingLocked()
	d.gen, d.fails, d.healthy = gen, 0, false
	d.genNow.Store(int64(gen))
	ctx, cancel := context.WithCancel(context.Background())
	d.stopPoll, d.kick = cancel, make(chan struct{}, 1)
	d.polls.Add(1)
	go func(kick <-chan struct{}) {
		defer d.polls.Done()
		d.poll(ctx, gen, kick)
	}(d.kick)
}

// Unready says the child is gone or about to be stopped: hold new
// requests and stop polling until the next launch.
func (d *Door) Unready() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopPollingLocked()
}

func (d *Door) stopPollingLocked() {
	if d.stopPoll != nil {
		d.stopPoll()
		d.stopPoll = nil
	}
	d.ready.Store(false)
	d.gate.setOpen(false)
}

// Drain holds new requests (as Unready) and returns a channel that is
// closed once every request passed to the child has finished.
func (d *Door) Drain() <-chan struct{} {
	d.Unready()
	return d.gate.drained()
}

// Profile sets the profile that answers carry (X-GPUGuard-Profile and
// X-GPUGuard-Level).
func (d *Door) Profile(name string, level, levels int) {
	if t := d.tag.Load(); t.name == name && t.level == strconv.Itoa(level) {
		return
	}
	d.tag.Store(newProfileTag(name, strconv.Itoa(level), strconv.Itoa(max(levels, level+1))))
}

// Short says whether memory is short (a step down is pending, or the
// watermark is at or above high): P1 requests then go to the fallback.
func (d *Door) Short(short bool) { d.short.Store(short) }

// Ready reports whether the gate is open: the child answered its health
// check and no drain or exit has closed it since.
func (d *Door) Ready() bool { return d.ready.Load() }

// Held is how many requests wait now.
func (d *Door) Held() int { return d.gate.held() }

// suspect closes the gate after a request found the child's connection
// failing (refused, reset): the child is dying or gone, so the next
// requests wait (rather than fail the same way) until a health check
// passes, which is asked for now.
func (d *Door) suspect(gen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.gen || d.stopPoll == nil || !d.ready.Load() {
		return
	}
	d.logf("the child's connection failed: holding requests until its health check passes")
	d.ready.Store(false)
	d.gate.setOpen(false)
	d.fails = 0
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// currentGen is the launch a request passing the gate now goes to. It is
// read on every request, so it takes no lock: Launched stores it with gen.
func (d *Door) currentGen() int { return int(d.genNow.Load()) }

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
func (d *Door) Serve(ln net.Listener) error {
	if err := d.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Close ends the door: held requests get 503 at once, requests still in
// flight get until ctx ends to finish, and the health poller stops.
func (d *Door) Close(ctx context.Context) error {
	d.gate.shutdown()
	d.mu.Lock()
	if d.stopPoll != nil {
		d.stopPoll()
		d.stopPoll = nil
	}
	d.ready.Store(false)
	d.mu.Unlock()
	d.polls.Wait()
	err := d.srv.Shutdown(ctx)
	if err != nil {
		err = d.srv.Close()
	}
	if d.hop != nil {
		// The requests have ended (or were cut off): the kept connections
		// to the child go too, rather than wait for its idle timeout.
		d.hop.CloseIdleConnections()
	}
	return err
}

// logWriter turns the proxy's log lines into Logf lines.
type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
