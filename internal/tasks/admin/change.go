package admin

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/control"
	"github.com/gpuguard/gpuguard/internal/journal"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/safetext"
	"github.com/gpuguard/gpuguard/internal/tasks/store"
)

// Change is a drop or a retry of one task.
type Change struct {
	Name   string // the instance
	Dir    string // its state dir (holding deferred/)
	Socket string // its control socket, "" when unknown
	Action string // "drop" or "retry"
	Ticket string
}

// Do carries out c: in the store (shared with the running instance),
// then told to the instance, which journals a drop; with no instance
// running, the drop is journaled here. It returns the line to print.
func (c Change) Do(ctx context.Context) (string, error) {
	s, err := store.OpenAt(c.Dir, c.Name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", c.Name, err)
	}
	if s == nil {
		return "", fmt.Errorf("%s has no deferred tasks (no queue in %s)", c.Name, c.Dir)
	}
	defer s.Close()
	var ev api.Event
	var msg string
	switch c.Action {
	case "drop":
		t, err := s.Drop(ctx, c.Ticket)
		if err != nil {
			return "", err
		}
		ev = api.Event{Event: api.EventTaskDropped, Ticket: t.Ticket, Tool: t.Tool, Detail: "dropped by gpuguard tasks (state " + t.State + ")"}
		msg = fmt.Sprintf("dropped %s (%s, %s)", safetext.Escape(t.Ticket), safetext.Escape(t.Tool), t.State)
	case "retry":
		if err := s.Retry(ctx, c.Ticket, time.Now()); err != nil {
			return "", err
		}
		msg = fmt.Sprintf("queued %s again", safetext.Escape(c.Ticket))
	default:
		return "", fmt.Errorf("unknown action %q: want drop or retry", c.Action)
	}
	if told := c.tell(ctx, ev); !told && ev.Event != "" {
		if err := c.journal(ev); err != nil {
			return msg, fmt.Errorf("the task was dropped, but journaling it failed: %w", err)
		}
	}
	return msg, nil
}

// tell tells a running instance of the change (it journals ev and
// re-reads its counts); false when none answers.
func (c Change) tell(ctx context.Context, ev api.Event) bool {
	if c.Socket == "" {
		return false
	}
	conn, err := control.Dial(ctx, c.Socket)
	if err != nil {
		return false
	}
	defer conn.Close()
	return conn.NoteTask(ctx, ev) == nil
}

// journal writes ev into the instance's journal itself.
func (c Change) journal(ev api.Event) error {
	jr, err := journal.Open(filepath.Join(c.Dir, paths.JournalFile), journal.Options{Name: c.Name})
	if err != nil {
		return err
	}
	ev.Time, ev.Name = time.Now(), c.Name
	jr.Observe(ev)
	return jr.Close()
}
