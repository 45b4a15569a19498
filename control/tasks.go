package control

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

// Request types of deferred tasks (see also reserve's payload and
// subscribe's tasks).
const (
	TypeDone   = "done"
	TypeFailed = "failed"
	// EventTask is the "type" of a task delivery.
	EventTask = "task"
	// TypeTaskNote is internal: `gpuguard tasks` tells the instance of a
	// task it dropped or retried in the shared store.
	TypeTaskNote = "task_note"
)

// Tasks is a Backend that keeps deferred tasks. It is separate from
// Backend so that a backend without a queue still serves the rest: a
// reserve with a payload is then answered as one without, and done and
// failed are refused.
type Tasks interface {
	// DeferTask decides r as Reserve does and, when the decision is defer,
	// stores the task (made durable) before it returns its ticket; a task
	// that could not be stored is a deny, with no ticket.
	DeferTask(ctx context.Context, r admission.Request, payload json.RawMessage) (admission.Decision, string, error)
	// SubscribeTasks registers deliver for task deliveries; it returns the
	// subscription's id and the function that ends it.
	SubscribeTasks(deliver func(api.TaskDelivery) bool) (int64, func())
	// TaskDone and TaskFailed finish the task delivered on subscription
	// sub; an error names why not (unknown ticket, another connection's).
	TaskDone(ctx context.Context, sub int64, ticket string) error
	TaskFailed(ctx context.Context, sub int64, ticket, reason string) error
	// NoteTask learns of a change `gpuguard tasks` made in the store: ev
	// (a task_dropped event) is journaled; an empty ev only makes the
	// instance look at its queue again.
	NoteTask(ctx context.Context, ev api.Event) error
}

// deferReply is reserve's reply with the ticket of a stored task.
type deferReply struct {
	reserveReply
	Ticket string `json:"ticket,omitempty"`
}

// decodePayload reads reserve's optional payload: any JSON value but null
// (the same as none), kept compact.
func decodePayload(fields map[string]json.RawMessage) (json.RawMessage, error) {
	raw, ok := fields["payload"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf(`reserve: "payload": %v`, err)
	}
	return b.Bytes(), nil
}

// decodeTasks decodes done and failed (handled false for other types) and
// subscribe's tasks flag.
func decodeTasks(typ string, fields map[string]json.RawMessage, req *request) (handled bool, err error) {
	switch typ {
	case TypeSubscribe:
		if raw, ok := fields["tasks"]; ok {
			if err := json.Unmarshal(raw, &req.Tasks); err != nil {
				return true, fmt.Errorf(`subscribe: "tasks" must be true or false, got %s`, abbrev(string(raw)))
			}
		}
		return true, nil
	case TypeTaskNote:
		if raw, ok := fields["event"]; ok {
			if err := json.Unmarshal(raw, &req.Note); err != nil {
				return true, fmt.Errorf("task_note: %v", err)
			}
		}
		if req.Note.Event != "" && req.Note.Event != api.EventTaskDropped {
			return true, fmt.Errorf("task_note: event %q: want %q", req.Note.Event, api.EventTaskDropped)
		}
		return true, nil
	case TypeDone, TypeFailed:
		t, ok, err := stringField(fields, "ticket")
		if err == nil && (!ok || t == "") {
			err = fmt.Errorf(`%s: "ticket" is required`, typ)
		}
		req.Ticket = t
		if err == nil && typ == TypeFailed {
			req.Detail, _, err = stringField(fields, "error")
		}
		return true, err
	}
	return false, nil
}

// handleDefer answers a reserve with a payload; handled is false when the
// backend keeps no tasks (the reserve is then answered as without one).
func (c *conn) handleDefer(ctx context.Context, b Backend, req request) (handled, alive bool) {
	tb, ok := b.(Tasks)
	if !ok {
		return false, true
	}
	d, ticket, err := tb.DeferTask(ctx, req.Reserve, req.Payload)
	if err != nil {
		return true, c.write(errorLine(req.ID, err)) == nil
	}
	return true, c.write(encodeLine(deferReply{reserveReply{OK: true, ID: req.ID, Decision: d.Decision, Lease: d.Lease, Reason: d.Reason}, ticket})) == nil
}

// subscribeTasks registers the connection for deliveries, after the
// subscribe reply went out (so the reply comes first). One connection
// subscribes once.
func (c *conn) subscribeTasks(b Backend) {
	tb, ok := b.(Tasks)
	if !ok || c.taskCancel != nil {
		return
	}
	c.taskSub, c.taskCancel = tb.SubscribeTasks(func(t api.TaskDelivery) bool {
		t.Type = EventTask
		return c.write(encodeLine(t)) == nil
	})
}

// endTasks ends the connection's task subscription: a task in flight to
// it goes back to the queue.
func (c *conn) endTasks() {
	if c.taskCancel != nil {
		c.taskCancel()
	}
}

// handleNote answers task_note.
func (c *conn) handleNote(ctx context.Context, b Backend, req request) bool {
	tb, ok := b.(Tasks)
	if !ok {
		return c.write(errorLine(req.ID, fmt.Errorf("%s: this instance keeps no deferred tasks", req.Type))) == nil
	}
	if err := tb.NoteTask(ctx, req.Note); err != nil {
		return c.write(errorLine(req.ID, err)) == nil
	}
	return c.write(encodeLine(okReply{OK: true, ID: req.ID})) == nil
}

// NoteTask tells the instance of a change made in its store.
func (c *Client) NoteTask(ctx context.Context, ev api.Event) error {
	_, err := c.call(ctx, map[string]any{"type": TypeTaskNote, "event": ev})
	return err
}

// handleFinish answers done and failed.
func (c *conn) handleFinish(ctx context.Context, b Backend, req request) bool {
	tb, ok := b.(Tasks)
	if !ok {
		return c.write(errorLine(req.ID, fmt.Errorf("%s: this instance keeps no deferred tasks", req.Type))) == nil
	}
	var err error
	if req.Type == TypeDone {
		err = tb.TaskDone(ctx, c.taskSub, req.Ticket)
	} else {
		err = tb.TaskFailed(ctx, c.taskSub, req.Ticket, req.Detail)
	}
	if err != nil {
		return c.write(errorLine(req.ID, err)) == nil
	}
	return c.write(encodeLine(okReply{OK: true, ID: req.ID})) == nil
}

// Task is a delivery as a client reads it.
type Task = api.TaskDelivery

// Defer reserves with a payload: the reply's ticket is set when the task
// was stored.
func (c *Client) Defer(ctx context.Context, r admission.Request, payload any) (admission.Decision, string, error) {
	msg := map[string]any{"type": TypeReserve, "bytes": r.Bytes, "payload": payload}
	if r.Priority != "" {
		msg["priority"] = r.Priority
	}
	if r.Tool != "" {
		msg["tool"] = r.Tool
	}
	if r.TTL > 0 {
		msg["ttl"] = r.TTL.String()
	}
	line, err := c.call(ctx, msg)
	if err != nil {
		return admission.Decision{}, "", err
	}
	var rep deferReply
	if err := json.Unmarshal(line, &rep); err != nil {
		return admission.Decision{}, "", fmt.Errorf("bad reserve reply from %s: %w", c.path, err)
	}
	return admission.Decision{Decision: rep.Decision, Lease: rep.Lease, Reason: rep.Reason}, rep.Ticket, nil
}
