package control

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

func TestDecodeTasks(t *testing.T) {
	for _, c := range []struct {
		line string
		want func(request) bool
		err  string
	}{
		{`{"type":"reserve","bytes":1,"priority":"P2","payload":{"a": [1, 2]}}`, func(r request) bool { return string(r.Payload) == `{"a":[1,2]}` }, ""},
		{`{"type":"reserve","bytes":1,"payload":null}`, func(r request) bool { return r.Payload == nil }, ""},
		{`{"type":"reserve","bytes":1}`, func(r request) bool { return r.Payload == nil }, ""},
		{`{"type":"subscribe","tasks":true}`, func(r request) bool { return r.Tasks }, ""},
		{`{"type":"subscribe"}`, func(r request) bool { return !r.Tasks }, ""},
		{`{"type":"subscribe","tasks":"yes"}`, nil, "true or false"},
		{`{"type":"done","ticket":"t-1"}`, func(r request) bool { return r.Ticket == "t-1" }, ""},
		{`{"type":"done"}`, nil, `"ticket" is required`},
		{`{"type":"failed","ticket":"t-1","error":"boom"}`, func(r request) bool { return r.Ticket == "t-1" && r.Detail == "boom" }, ""},
		{`{"type":"failed","ticket":7}`, nil, "must be a string"},
		{`{"type":"task_note","event":{"event":"task_dropped","ticket":"t-1"}}`, func(r request) bool { return r.Note.Ticket == "t-1" }, ""},
		{`{"type":"task_note","event":{"event":"stepdown"}}`, nil, "want"},
	} {
		r, err := decodeRequest([]byte(c.line))
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.line, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.line, err)
		case !c.want(r):
			t.Errorf("%s: decoded %+v", c.line, r)
		}
	}
}

// taskBackend is fakeBackend with a queue of one delivery.
type taskBackend struct {
	*fakeBackend
	mu      sync.Mutex
	deliver func(api.TaskDelivery) bool
	sub     int64
	payload json.RawMessage
	done    []string
	ended   chan struct{}
	subbed  chan struct{}
}

func (b *taskBackend) DeferTask(_ context.Context, r admission.Request, p json.RawMessage) (admission.Decision, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.payload = p
	return admission.Decision{Decision: admission.DecisionDefer, Reason: "short"}, "t-abc", nil
}

func (b *taskBackend) SubscribeTasks(deliver func(api.TaskDelivery) bool) (int64, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deliver, b.sub = deliver, 7
	close(b.subbed)
	return 7, func() { close(b.ended) }
}

func (b *taskBackend) TaskDone(_ context.Context, sub int64, ticket string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if sub != 7 {
		return errors.New("task not delivered to this connection")
	}
	b.done = append(b.done, ticket)
	return nil
}

func (b *taskBackend) TaskFailed(_ context.Context, sub int64, ticket, reason string) error {
	return b.TaskDone(context.Background(), sub, ticket)
}

func (b *taskBackend) NoteTask(context.Context, api.Event) error { return nil }

// The socket's side of deferred tasks: the ticket in the reserve reply, a
// delivery after the subscribe reply, done from the subscribed connection
// (and refused from another), the subscription ended with the connection.
func TestTasksOverTheSocket(t *testing.T) {
	b := &taskBackend{fakeBackend: newFakeBackend(), ended: make(chan struct{}), subbed: make(chan struct{})}
	s := serve(t, b, nil)
	c := dialRaw(t, s.Path())
	rep := c.roundTrip(`{"type":"reserve","bytes":5,"priority":"P2","payload":{"x":1},"id":1}`)
	if rep["ticket"] != "t-abc" || rep["decision"] != "defer" || rep["id"] != float64(1) {
		t.Fatalf("reserve reply %v", rep)
	}
	if string(b.payload) != `{"x":1}` {
		t.Fatalf("payload %s", b.payload)
	}
	if rep := c.roundTrip(`{"type":"subscribe","tasks":true}`); rep["ok"] != true {
		t.Fatalf("subscribe %v", rep)
	}
	<-b.subbed // registered after the reply went out
	b.mu.Lock()
	deliver := b.deliver
	b.mu.Unlock()
	if deliver == nil || !deliver(api.TaskDelivery{Ticket: "t-abc", Tool: "x", Attempt: 1}) {
		t.Fatal("no delivery")
	}
	ev := c.recv()
	if ev["type"] != "task" || ev["ticket"] != "t-abc" || ev["attempt"] != float64(1) {
		t.Fatalf("delivery %v", ev)
	}
	other := dialRaw(t, s.Path())
	if rep := other.roundTrip(`{"type":"done","ticket":"t-abc"}`); rep["ok"] != false || !strings.Contains(rep["error"].(string), "not delivered") {
		t.Fatalf("done from another connection: %v", rep)
	}
	if rep := other.roundTrip(`{"type":"status"}`); rep["ok"] != true {
		t.Fatalf("the connection did not stay usable: %v", rep)
	}
	if rep := c.roundTrip(`{"type":"done","ticket":"t-abc"}`); rep["ok"] != true {
		t.Fatalf("done %v", rep)
	}
	c.nc.Close()
	select { // the connection's end ends its subscription
	case <-b.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription outlived its connection")
	}
}
