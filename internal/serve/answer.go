package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// answers are the door's own answers to a request it does not pass, or
// cannot: an error in the shape OpenAI clients show (answer), the 503 of
// a request it holds back (reject), the 408 of a body that did not come;
// each stamped with the profile in force (tag, which Door.Profile sets and
// the child's answers carry too: Door.stamp).
type answers struct {
	tag   atomic.Pointer[profileTag]
	meter Meter // nil: nothing counted
}

// setProfile makes name, at level of levels, the profile the answers say.
func (a *answers) setProfile(name string, level, levels int) {
	if t := a.tag.Load(); t.name == name && t.level == strconv.Itoa(level) {
		return
	}
	a.tag.Store(newProfileTag(name, strconv.Itoa(level), strconv.Itoa(max(levels, level+1))))
}

// reject answers a request the door would not pass.
func (a *answers) reject(w http.ResponseWriter, err error) {
	reason, msg := "hold", "the model server is not ready (starting, restarting or stepping down); retry later"
	switch {
	case errors.Is(err, errFull):
		reason, msg = "full", "too many requests are waiting for the model server; retry later"
	case errors.Is(err, errShutdown):
		reason, msg = "", "gpuguard is shutting down; retry later"
	case errors.Is(err, errMayHaveRun):
		reason, msg = "", "the model server dropped the connection after it may have read the request, which is not sent twice "+
			"(only GET, HEAD, OPTIONS, PUT, DELETE or a request with an Idempotency-Key is); retry later"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, errClientGone):
		return // the client left while held
	}
	if reason != "" && a.meter != nil {
		a.meter.ServeRejected(reason)
	}
	a.answer(w, http.StatusServiceUnavailable, "gpuguard_unavailable", msg, time.Second)
}

// errorBody is the OpenAI-shaped error that OpenAI client libraries show.
type errorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// answer writes the door's own error answer; retryAfter > 0 adds
// Retry-After (whole seconds, at least 1).
func (a *answers) answer(w http.ResponseWriter, code int, typ, msg string, retryAfter time.Duration) {
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Code = msg, typ, code
	h := w.Header()
	a.header(h)
	if retryAfter > 0 {
		h.Set("Retry-After", strconvSeconds(retryAfter))
	}
	writeJSON(w, code, b)
}

// writeJSON answers v as JSON with its Content-Length: the client's
// writer flushes each write, so without one the door's own small answers
// would go out chunked.
func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "gpuguard: encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n') // as json.Encoder wrote it
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// header stamps h with the profile in force.
func (a *answers) header(h http.Header) {
	t := a.tag.Load()
	h.Set(HeaderProfile, t.name)
	h.Set(HeaderLevel, t.level)
}

// bodyFailed answers a request whose body, read whole before it is sent
// (maxBuffered), did not come: 408 when it stopped coming (timedBody),
// nothing when the client left.
func (a *answers) bodyFailed(w http.ResponseWriter, r *http.Request, ex *exchange, cfg *conf) {
	switch {
	case ex.timed.timedOut():
		a.bodyTimeout(w, cfg)
	case r.Context().Err() == nil:
		w.Header().Set("Connection", "close")
		a.answer(w, http.StatusBadRequest, "invalid_request_error", "the request body ended before its Content-Length", 0)
	}
}

// bodyTimeout answers 408 to a request whose body did not come in time,
// and closes its connection (what remains of the body is never read).
func (a *answers) bodyTimeout(w http.ResponseWriter, cfg *conf) {
	w.Header().Set("Connection", "close")
	a.answer(w, http.StatusRequestTimeout, "invalid_request_error", fmt.Sprintf(
		"%v: no byte for %s, or not all in within %s of the request's start", errBodyTimeout, cfg.bodyIdle(), cfg.bodyTotal()), 0)
}
