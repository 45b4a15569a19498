package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"
)

// ServeHTTP passes r to the child (or answers it itself: its own paths,
// a request it refuses, a wait that ran out, a full queue).
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	cc := clientConnFrom(r.Context())
	if cc != nil && !d.framed(w, cc) {
		return
	}
	if strings.HasPrefix(r.URL.Path, "/gpuguard/") {
		d.own(w, r)
		return
	}
	ex := &exchange{w: countingWriter{ResponseWriter: w}}
	ex.w.flush, _ = w.(http.Flusher)
	cw := &ex.w
	defer func() {
		if d.opts.Meter != nil {
			d.opts.Meter.ServeRequest(cw.code())
		}
	}()
	cfg := d.cfg.Load()
	watch := ex.bound(r, cc, cfg, start)
	prio, ok := priority(r.Header.Get(HeaderPriority), cfg.Priority)
	if !ok {
		d.say.answer(cw, http.StatusBadRequest, "invalid_request_error",
			HeaderPriority+" must be P0, P1 or P2, got "+quote(r.Header.Get(HeaderPriority)), 0)
		return
	}
	if d.short.Load() {
		switch {
		case prio == P2 && d.deferRequest(cw, r):
			return
		case prio == P1 && cfg.fallback != nil:
			ex.target, ex.fallback = cfg.fallback, true
			d.pass(cw, r, ex)
			return
		}
	}
	if cfg.upstream == nil {
		d.say.answer(cw, http.StatusBadGateway, "gpuguard_unavailable", "the upstream URL "+quote(cfg.Upstream)+" is invalid", 0)
		return
	}
	ex.target = cfg.upstream
	if err := d.enter(r.Context(), cfg, ex, watch); err != nil {
		d.say.reject(cw, err)
		return
	}
	defer d.leave(ex)
	switch n := r.ContentLength; {
	case n > 0 && n <= maxBuffered:
		var err error
		if ex.whole, err = readWhole(r.Body, n); err != nil {
			d.say.bodyFailed(cw, r, ex, cfg)
			return
		}
		r.Body, _ = ex.freshBody()
	case cfg.Retry && r.Body != nil && r.Body != http.NoBody:
		ex.kept = replayBody{src: r.Body, limit: maxReplay}
		ex.body = &ex.kept
		r.Body = ex.body.attempt()
	}
	d.pass(cw, r, ex)
}

// framed answers 400, and closes the connection, when the request's head
// declared a framing the door refuses (clientConn.check): the request goes
// nowhere. A request whose body the connection does not follow (chunked)
// passes, and its answer closes the connection.
func (d *Door) framed(w http.ResponseWriter, cc *clientConn) bool {
	closeAfter, err := cc.check()
	if closeAfter {
		w.Header().Set("Connection", "close")
	}
	if err == nil {
		return true
	}
	d.say.answer(w, http.StatusBadRequest, "invalid_request_error", "the request's framing is refused (RFC 9112 6.3): "+err.Error(), 0)
	if d.opts.Meter != nil {
		d.opts.Meter.ServeRequest(http.StatusBadRequest)
	}
	return false
}

// enter waits at the gate for ex, and records where it goes. watch, when
// not nil, watches the client's connection while ex is held (gate.wait).
func (d *Door) enter(ctx context.Context, cfg *conf, ex *exchange, watch watcher) error {
	if f := d.opts.OnRequest; f != nil {
		f(!d.up.ready.Load())
	}
	waited, err := d.gate.wait(ctx, cfg.Hold, cfg.MaxHeld, watch)
	if waited > 0 && d.opts.Meter != nil {
		d.opts.Meter.ServeHold(waited)
	}
	if err != nil {
		return err
	}
	ex.inflight, ex.gen = true, d.up.current()
	return nil
}

func (d *Door) leave(ex *exchange) {
	if ex.inflight {
		ex.inflight = false
		d.gate.leave()
	}
}

// rewrite sends the request to its target with the client's address
// appended to any X-Forwarded-For it sent (hop-by-hop headers are already
// gone).
func (d *Door) rewrite(pr *httputil.ProxyRequest) {
	ex := exchangeFrom(pr.In.Context())
	pr.SetURL(ex.target)
	if ex.whole != nil || ex.body != nil {
		pr.Out.GetBody = ex.freshBody
	}
	if ex.whole != nil {
		// The door has the body: the child has nothing to agree to before
		// it is sent, and a child that ignores the expectation would cost
		// the transport's wait for a 100.
		pr.Out.Header.Del("Expect")
	}
	if xff, ok := pr.In.Header["X-Forwarded-For"]; ok {
		pr.Out.Header["X-Forwarded-For"] = xff
	}
	pr.SetXForwarded()
}

// stamp adds the profile headers to the child's (or the fallback's)
// answer, with values made once per profile (profileTag). An answer whose
// framing is refused (childConn) is not passed: the error makes it a 502,
// and the proxy closes its connection. An upgrade (101) turns the
// client's connection into a plain pipe.
func (d *Door) stamp(resp *http.Response) error {
	ctx := resp.Request.Context()
	ex := exchangeFrom(ctx)
	if ex != nil {
		if c := ex.child.Load(); c != nil {
			if err := c.answerErr(); err != nil {
				return fmt.Errorf("%w: %w", errBadAnswer, err)
			}
		}
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if cc := clientConnFrom(ctx); cc != nil {
			cc.upgraded()
		}
	}
	t := d.say.tag.Load()
	level := t.levelV
	if ex != nil && ex.fallback {
		resp.Header[canonFallback] = t.fallbackV
		level = t.nextV
	}
	resp.Header[canonProfile] = t.nameV
	resp.Header[canonLevel] = level
	return nil
}

// The profile headers' names as http.Header keys them
// (TestCanonicalHeaderNames), so that stamp sets them without
// canonicalising each time and replaces the child's own of the same name.
const (
	canonProfile  = "X-Gpuguard-Profile"
	canonLevel    = "X-Gpuguard-Level"
	canonFallback = "X-Gpuguard-Fallback"
)

// proxyError answers a request the proxy could not pass: its body did
// not come in time (408, and the connection closes), the wait for a retry
// ran out or the request may not be sent again (503, as for any held
// request), the client left (nothing to answer), the child's answer was
// malformed or the child failed (502).
func (d *Door) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	ex := exchangeFrom(r.Context())
	switch {
	case ex != nil && ex.timed.timedOut():
		d.say.bodyTimeout(w, d.cfg.Load())
	case ex != nil && ex.rejected != nil:
		d.say.reject(w, ex.rejected)
	case r.Context().Err() != nil:
		// The client went away; there is no one to answer.
		w.WriteHeader(499)
	case errors.Is(err, errBadAnswer):
		d.say.answer(w, http.StatusBadGateway, "gpuguard_upstream_error", err.Error(), 0)
	case ex != nil && ex.fallback:
		d.say.answer(w, http.StatusBadGateway, "gpuguard_fallback_error", "the fallback server failed: "+err.Error(), 0)
	default:
		d.say.answer(w, http.StatusBadGateway, "gpuguard_upstream_error", "the model server failed before answering: "+err.Error(), 0)
	}
}

// own answers the door's own paths: the status object (200 when ready,
// 503 with the same body when not); every other /gpuguard/ path is 404.
func (d *Door) own(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, TasksPath) {
		d.taskStatus(w, r)
		return
	}
	if r.URL.Path != StatusPath || d.opts.Status == nil {
		d.say.answer(w, http.StatusNotFound, "not_found", "no such gpuguard path: "+r.URL.Path, 0)
		return
	}
	st := d.opts.Status().Public() // the door may listen beyond this host
	st.Ready, st.Held = d.Ready(), d.Held()
	code := http.StatusOK
	if !st.Ready {
		code = http.StatusServiceUnavailable
	}
	h := w.Header()
	d.say.header(h)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(st)
	}
}

// priority is the request's priority: its header, else the default.
func priority(h, def string) (string, bool) {
	switch strings.ToUpper(strings.TrimSpace(h)) {
	case "":
		return def, true
	case P0:
		return P0, true
	case P1:
		return P1, true
	case P2:
		return P2, true
	}
	return "", false
}
