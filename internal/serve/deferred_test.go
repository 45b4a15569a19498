package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// memQueue is a deferred-task queue in memory; the test plays the
// supervisor (it replays and finishes tasks itself).
type memQueue struct {
	mu      sync.Mutex
	tasks   map[string]api.Task
	bodies  map[string][]byte // request bodies
	results map[string][]byte
	answers map[string][]byte // result bodies
	next    int
	fail    error // Defer answers it
	// reading, when set, gets each deferral's body to read itself.
	reading func(io.Reader) ([]byte, error)
}

func newMemQueue() *memQueue {
	return &memQueue{tasks: map[string]api.Task{}, bodies: map[string][]byte{}, results: map[string][]byte{}, answers: map[string][]byte{}}
}

func (q *memQueue) Defer(_ context.Context, payload json.RawMessage, body io.Reader) (string, error) {
	read := q.reading
	if read == nil {
		read = io.ReadAll
	}
	b, err := read(body)
	if err != nil {
		return "", err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return "", q.fail
	}
	q.next++
	ticket := fmt.Sprintf("t-%d", q.next)
	q.tasks[ticket] = api.Task{Ticket: ticket, Tool: "http", Priority: P2, Payload: payload, State: api.TaskQueued}
	q.bodies[ticket] = b
	return ticket, nil
}

func (q *memQueue) ResultBody(_ context.Context, ticket string) (io.ReadCloser, int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.answers[ticket]
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

// replay replays ticket through fd as the supervisor does, and keeps its
// result and answer.
func (q *memQueue) replay(t *testing.T, fd *frontDoor, ticket string) error {
	t.Helper()
	q.mu.Lock()
	task, body := q.tasks[ticket], q.bodies[ticket]
	q.mu.Unlock()
	result, answer, err := fd.Replay(context.Background(), task.Payload, bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return err
	}
	defer answer.Close()
	b, err := io.ReadAll(answer)
	if err != nil {
		return err
	}
	q.mu.Lock()
	q.results[ticket], q.answers[ticket] = result, b
	q.mu.Unlock()
	return nil
}

func (q *memQueue) Lookup(_ context.Context, ticket string) (api.Task, []byte, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.tasks[ticket]
	return t, q.results[ticket], ok, nil
}

func (q *memQueue) set(ticket string, f func(*api.Task)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.tasks[ticket]
	f(&t)
	q.tasks[ticket] = t
}

func (q *memQueue) only(t *testing.T) api.Task {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.tasks) != 1 {
		t.Fatalf("%d tasks stored, want 1", len(q.tasks))
	}
	for _, task := range q.tasks {
		return task
	}
	return api.Task{}
}

// TestDeferredRequest: a P2 request while memory is short is stored (its
// method, path, query, end-to-end headers and body) and answered 202 with
// a ticket, a status URL and Location, without reaching the child; the
// status URL says queued, then running, then answers the replayed
// response with X-GPUGuard-Ticket.
func TestDeferredRequest(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s?%s auth=%q hop=%q body=%s", r.Method, r.URL.Path, r.URL.RawQuery,
			r.Header.Get("Authorization"), r.Header.Get("X-Hop"), b))
		mu.Unlock()
		w.Header().Set("X-Out", "yes")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"answer":42}`)
	})
	q := newMemQueue()
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, q)
	fd.launch(t, 1)
	fd.Short(true)
	c := newClient(t)

	resp, body := do(t, c, http.MethodPost, fd.url+"/v1/chat?x=1", []byte(`{"q":"hi"}`),
		HeaderPriority, "P2", "Authorization", "Bearer k", "Connection", "X-Hop", "X-Hop", "1")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("deferred: %d %s", resp.StatusCode, body)
	}
	if resp.ContentLength != int64(len(body)) {
		t.Errorf("the 202 has Content-Length %d for %d bytes (chunked?)", resp.ContentLength, len(body))
	}
	var got struct{ Ticket, StatusURL string }
	var raw map[string]string
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("202 body %s: %v", body, err)
	}
	got.Ticket, got.StatusURL = raw["ticket"], raw["status_url"]
	task := q.only(t)
	if got.Ticket != task.Ticket || got.StatusURL != TasksPath+task.Ticket || resp.Header.Get("Location") != got.StatusURL || len(raw) != 2 {
		t.Fatalf("202 body %s, Location %q; stored %s", body, resp.Header.Get("Location"), task.Ticket)
	}
	mu.Lock()
	if len(seen) != 0 {
		t.Fatalf("the child saw a deferred request: %v", seen)
	}
	mu.Unlock()

	status := func(wantCode int, want string) http.Header {
		t.Helper()
		resp, body := do(t, c, http.MethodGet, fd.url+got.StatusURL, nil)
		if resp.StatusCode != wantCode || strings.TrimSpace(string(body)) != want {
			t.Fatalf("status URL: %d %s, want %d %s", resp.StatusCode, body, wantCode, want)
		}
		return resp.Header
	}
	status(http.StatusAccepted, `{"state":"queued","attempts":0}`)
	q.set(task.Ticket, func(t *api.Task) { t.State, t.Attempts = api.TaskRunning, 1 })
	status(http.StatusAccepted, `{"state":"running","attempts":1}`)

	if err := q.replay(t, fd, task.Ticket); err != nil {
		t.Fatalf("replay: %v", err)
	}
	mu.Lock()
	if want := `POST /v1/chat?x=1 auth="Bearer k" hop="" body={"q":"hi"}`; len(seen) != 1 || seen[0] != want {
		t.Errorf("the child saw %v, want [%s]", seen, want)
	}
	mu.Unlock()
	q.set(task.Ticket, func(t *api.Task) { t.State = api.TaskDone })
	h := status(http.StatusCreated, `{"answer":42}`)
	if h.Get("X-Out") != "yes" || h.Get(HeaderTicket) != task.Ticket || h.Get("Content-Length") != "13" {
		t.Errorf("stored response headers %v", h)
	}

	fd.Short(false) // memory free: P2 passes
	resp, body = do(t, c, http.MethodGet, fd.url+"/x", nil, HeaderPriority, "P2")
	if resp.StatusCode != http.StatusCreated || string(body) != `{"answer":42}` {
		t.Errorf("P2 with memory free: %d %s", resp.StatusCode, body)
	}
}

// TestDeferredTooLarge: a body over 16 MiB is answered 413 and not stored.
func TestDeferredTooLarge(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("the child saw it") })
	q := newMemQueue()
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, q)
	fd.launch(t, 1)
	fd.Short(true)
	c := newClient(t)
	resp, body := do(t, c, http.MethodPost, fd.url+"/x", make([]byte, maxDeferred+1), HeaderPriority, "P2")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"code":413`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(q.tasks) != 0 {
		t.Fatalf("stored %d tasks", len(q.tasks))
	}
	resp, _ = do(t, c, http.MethodPost, fd.url+"/x", make([]byte, maxDeferred), HeaderPriority, "P2")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("a body of exactly 16 MiB: %d", resp.StatusCode)
	}
}

// TestDeferredStoreFails: a task that could not be stored gets 503 with
// the reason, and no ticket.
func TestDeferredStoreFails(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("the child saw it") })
	q := newMemQueue()
	q.fail = errors.New("the deferred request could not be stored: disk full")
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, q)
	fd.launch(t, 1)
	fd.Short(true)
	resp, body := do(t, newClient(t), http.MethodPost, fd.url+"/x", []byte("{}"), HeaderPriority, "P2")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "disk full") ||
		strings.Contains(string(body), "ticket") || resp.Header.Get("Location") != "" {
		t.Fatalf("%d %s %v", resp.StatusCode, body, resp.Header)
	}
}

// TestTaskStatusUnknown: an unknown ticket, another tool's task, and a
// door without a queue answer 404; a dead one 502 with its last error.
func TestTaskStatusUnknown(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) {})
	q := newMemQueue()
	q.tasks["t-sock"] = api.Task{Ticket: "t-sock", Tool: "embed", State: api.TaskQueued}
	q.tasks["t-dead"] = api.Task{Ticket: "t-dead", Tool: "http", State: api.TaskDead, Attempts: 5, LastError: "the model server answered 500"}
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, q)
	bare := startDoor(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10})
	c := newClient(t)
	for _, url := range []string{fd.url + TasksPath + "t-nope", fd.url + TasksPath + "t-sock", fd.url + TasksPath, bare.url + TasksPath + "t-dead"} {
		if resp, body := do(t, c, http.MethodGet, url, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d %s", url, resp.StatusCode, body)
		}
	}
	resp, body := do(t, c, http.MethodGet, fd.url+TasksPath+"t-dead", nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "answered 500") {
		t.Errorf("dead: %d %s", resp.StatusCode, body)
	}
}

// TestReplayFailures: a closed gate, a 5xx, or no answer fails the
// attempt.
func TestReplayFailures(t *testing.T) {
	child := upstream(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	fd := startDoorQueue(t, Config{Upstream: child.URL, Hold: time.Minute, MaxHeld: 10}, newMemQueue())
	payload := json.RawMessage(`{"method":"GET","path":"/x"}`)
	if err := replay(fd, payload); err == nil || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("a replay before the child is ready: %v", err)
	}
	fd.launch(t, 1)
	if err := replay(fd, payload); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("a 503: %v", err)
	}
	gone := startDoorQueue(t, Config{Upstream: "http://" + freePort(t), Hold: time.Minute, MaxHeld: 10}, newMemQueue())
	gone.gate.setOpen(true) // as if its health check had passed
	if err := replay(gone, payload); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("no answer: %v", err)
	}
	if err := replay(fd, json.RawMessage(`[`)); err == nil {
		t.Error("a payload that does not parse replayed")
	}
}

// replay replays payload (no body) and reads its answer.
func replay(fd *frontDoor, payload json.RawMessage) error {
	_, answer, err := fd.Replay(context.Background(), payload, nil, 0)
	if err != nil {
		return err
	}
	defer answer.Close()
	_, err = io.Copy(io.Discard, answer)
	return err
}
