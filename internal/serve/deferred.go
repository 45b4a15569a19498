package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Queue is the deferred-task queue as the door uses it: it stores a
// deferred request durably and answers a ticket, and looks one up. The
// door knows no store and no policy (the supervisor implements it).
type Queue interface {
	// Defer stores payload as a task of tool http, with body, which it
	// reads to its end and writes to the store as it comes (never whole in
	// memory); the ticket is answered only once both are durable. An
	// error: nothing was stored (a failed read of body included).
	Defer(ctx context.Context, payload json.RawMessage, body io.Reader) (ticket string, err error)
	// Lookup answers a task and, once done, its result; found is false
	// for a ticket never stored, dropped, or done and expired.
	Lookup(ctx context.Context, ticket string) (t api.Task, result []byte, found bool, err error)
	// ResultBody opens a done task's stored response body, to read as it
	// is sent, and answers its length.
	ResultBody(ctx context.Context, ticket string) (io.ReadCloser, int64, error)
}

// TasksPath is the prefix of a deferred request's status URL.
const TasksPath = "/gpuguard/v1/tasks/"

// HeaderTicket names the ticket on a deferred request's stored response.
const HeaderTicket = "X-GPUGuard-Ticket"

// maxDeferred bounds a deferred request's body, and its response's: a
// larger request gets 413 (it is not stored), a larger response fails the
// attempt (a truncated answer is no answer).
const maxDeferred = 16 << 20

// deferredRequest is the payload of a task of tool http: what the door
// replays to the child. Its body is the task's own, apart in the store;
// Body (base64 in JSON) is set only in the payloads of tasks stored
// before bodies were kept apart, which are replayed as they were.
type deferredRequest struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Query  string      `json:"query,omitempty"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// deferredResponse is a replay's result: the child's answer as stored,
// its body apart in the store (Body: in results stored before that).
type deferredResponse struct {
	Status int         `json:"status"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"body,omitempty"`
}

// errTooLarge ends the read of a deferred request's body past
// maxDeferred.
var errTooLarge = fmt.Errorf("a deferred request's body is at most %d bytes", maxDeferred)

// deferBody is a deferred request's body as the store reads it: at most
// maxDeferred bytes (then errTooLarge), and what went wrong reading it,
// so that the door tells the client's fault (413, 400) from the store's.
type deferBody struct {
	r        io.Reader
	n        int64
	tooLarge bool
	err      error
}

func (b *deferBody) Read(p []byte) (int, error) {
	if b.tooLarge {
		return 0, errTooLarge
	}
	if room := maxDeferred + 1 - b.n; int64(len(p)) > room {
		p = p[:room] // one byte past the limit tells a body too large
	}
	k, err := b.r.Read(p)
	b.n += int64(k)
	if b.n > maxDeferred {
		b.tooLarge = true
		return k, errTooLarge
	}
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return k, err
}

// deferRequest stores r (P2, memory short) and answers 202 with its
// ticket. It reports false, and answers nothing, without a queue: the
// request is then held like P0. A store that cannot be written answers
// 503 with the reason: no ticket is given for a task not stored.
//
// While its body is written to the store, a deferral counts toward
// max_held, as a held request does: past it, 503 at once. The body goes
// to the store as it arrives, so a deferral costs the door a chunk of
// memory, not its body.
func (d *Door) deferRequest(w http.ResponseWriter, r *http.Request) bool {
	q := d.opts.Queue
	if q == nil {
		return false
	}
	if r.ContentLength > maxDeferred {
		d.say.answer(w, http.StatusRequestEntityTooLarge, "invalid_request_error", errTooLarge.Error(), 0)
		return true
	}
	if err := d.gate.enterDefer(d.cfg.Load().MaxHeld); err != nil {
		d.say.reject(w, err)
		return true
	}
	defer d.gate.leaveDefer()
	payload, err := json.Marshal(deferredRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: endToEnd(r.Header)})
	if err != nil {
		d.say.answer(w, http.StatusInternalServerError, "gpuguard_error", "encoding the deferred request: "+err.Error(), 0)
		return true
	}
	body := &deferBody{r: r.Body}
	ticket, err := q.Defer(r.Context(), payload, body)
	switch {
	case body.tooLarge:
		d.say.answer(w, http.StatusRequestEntityTooLarge, "invalid_request_error", errTooLarge.Error(), 0)
		return true
	case errors.Is(body.err, errBodyTimeout):
		d.say.bodyTimeout(w, d.cfg.Load())
		return true
	case body.err != nil:
		d.say.answer(w, http.StatusBadRequest, "invalid_request_error", "reading the request body: "+body.err.Error(), 0)
		return true
	case err != nil:
		d.say.answer(w, http.StatusServiceUnavailable, "gpuguard_unavailable", err.Error(), time.Second)
		return true
	}
	status := TasksPath + ticket
	h := w.Header()
	d.say.header(h)
	h.Set("Location", status)
	writeJSON(w, http.StatusAccepted, struct {
		Ticket    string `json:"ticket"`
		StatusURL string `json:"status_url"`
	}{ticket, status})
	return true
}

// taskStatus answers a deferred request's status URL: 202 with its state
// while pending, the stored response once done, 502 once dead (it will
// not run unless an operator retries it), 404 for an unknown ticket.
func (d *Door) taskStatus(w http.ResponseWriter, r *http.Request) {
	ticket := strings.TrimPrefix(r.URL.Path, TasksPath)
	q := d.opts.Queue
	if q == nil || ticket == "" || strings.Contains(ticket, "/") {
		d.say.answer(w, http.StatusNotFound, "not_found", "no such deferred request: "+quote(ticket), 0)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		d.say.answer(w, http.StatusMethodNotAllowed, "invalid_request_error", "a status URL answers GET", 0)
		return
	}
	t, result, found, err := q.Lookup(r.Context(), ticket)
	switch {
	case err != nil:
		d.say.answer(w, http.StatusServiceUnavailable, "gpuguard_unavailable", "the deferred-task store: "+err.Error(), time.Second)
		return
	case !found || t.Tool != toolHTTP:
		d.say.answer(w, http.StatusNotFound, "not_found", "no such deferred request: "+quote(ticket)+" (unknown, or its result expired)", 0)
		return
	case t.State == api.TaskDead:
		d.say.answer(w, http.StatusBadGateway, "gpuguard_task_dead",
			fmt.Sprintf("the deferred request failed %d times and will not run again: %s", t.Attempts, t.LastError), 0)
		return
	case t.State != api.TaskDone:
		h := w.Header()
		d.say.header(h)
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set(HeaderTicket, ticket)
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(struct {
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
		}{t.State, t.Attempts})
		return
	}
	var resp deferredResponse
	if err := json.Unmarshal(result, &resp); err != nil || resp.Status < 100 || resp.Status > 999 {
		d.say.answer(w, http.StatusInternalServerError, "gpuguard_error", "the stored response of "+quote(ticket)+" does not parse", 0)
		return
	}
	var body io.ReadCloser = io.NopCloser(bytes.NewReader(resp.Body))
	size := int64(len(resp.Body))
	if len(resp.Body) == 0 {
		body, size, err = q.ResultBody(r.Context(), ticket)
		if err != nil {
			d.say.answer(w, http.StatusServiceUnavailable, "gpuguard_unavailable", "the deferred-task store: "+err.Error(), time.Second)
			return
		}
	}
	defer body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	h.Set(HeaderTicket, ticket)
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(resp.Status)
	if r.Method != http.MethodHead {
		// From the store to the client a chunk at a time; a store that
		// fails midway leaves the answer short of its Content-Length,
		// which the client sees as a broken response, never a whole one.
		_, _ = io.Copy(w, body)
	}
}

// toolHTTP is the tool of a deferred request's task.
const toolHTTP = "http"

// endToEnd is h without its hop-by-hop headers (RFC 9110 7.6.1: they
// belong to one connection, so they are neither stored nor replayed),
// those named by Connection too. Content-Length goes as well: the replay
// sets its own.
func endToEnd(h http.Header) http.Header {
	hop := [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}
	out := h.Clone()
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				out.Del(name)
			}
		}
	}
	for _, name := range hop {
		out.Del(name)
	}
	return out
}
