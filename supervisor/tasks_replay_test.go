package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/deliver"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
	"github.com/gpuguard/gpuguard/policy"
)

// fakeReplayer answers each replay with the next of its errors (nil once
// they run out: the result).
type fakeReplayer struct {
	mu       sync.Mutex
	errs     []error
	payloads []string
	bodies   []string
}

// Replay answers the request's body, reversed, as the answer's body.
func (r *fakeReplayer) Replay(_ context.Context, payload json.RawMessage, body io.Reader, size int64) ([]byte, io.ReadCloser, error) {
	b, err := io.ReadAll(body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || int64(len(b)) != size {
		return nil, nil, fmt.Errorf("reading the body: %d bytes of %d, %v", len(b), size, err)
	}
	r.payloads = append(r.payloads, string(payload))
	r.bodies = append(r.bodies, string(b))
	if len(r.errs) > 0 {
		err := r.errs[0]
		r.errs = r.errs[1:]
		return nil, nil, err
	}
	slices.Reverse(b)
	return []byte(`{"status":200}`), io.NopCloser(bytes.NewReader(b)), nil
}

func (r *fakeReplayer) calls() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.payloads) }

func startReplay(t *testing.T, pol *policy.Policy, r *fakeReplayer) (*taskHarness, *memstore.Memory, *fakeDoor) {
	t.Helper()
	mem, door := memstore.New(), newFakeDoor()
	close(door.drain) // nothing in flight: every drain ends at once
	var q *deliver.Tasks
	h := startHarness(t, pol, func(_ *Config, d *Deps) {
		d.Door = door
		deliverFrom(&q, d, mem.Open(), r)
	})
	c := h.child()
	c.setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{Code: 0}) })
	sample()
	return &taskHarness{harness: h, mem: mem, child: c, tasks: q}, mem, door
}

// TestReplayWaitsForMemoryAndChild: a deferred request is replayed only
// once memory is not short and the child is ready; a failed replay counts
// an attempt and is retried after its backoff; the result is kept.
func TestReplayWaitsForMemoryAndChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeReplayer{errs: []error{errors.New("the model server answered 503")}}
		h, mem, door := startReplay(t, taskPolicy(nil), r)
		h.probe.setUsed(15 * gib) // above high: short
		sample()
		ticket, err := h.tasks.DeferRequest(context.Background(), json.RawMessage(`{"method":"GET"}`), strings.NewReader("hello"))
		if err != nil || len(ticket) < 32 {
			t.Fatalf("defer: %q %v", ticket, err)
		}
		if evs := h.rec.named(api.EventDeferred); len(evs) != 1 || evs[0].Tool != deliver.ToolHTTP || evs[0].Ticket != ticket {
			t.Fatalf("deferred events %+v", evs)
		}
		door.mu.Lock()
		door.ready = true
		door.mu.Unlock()
		sample()
		if n := r.calls(); n != 0 {
			t.Fatalf("replayed %d times while memory was short", n)
		}
		door.mu.Lock()
		door.ready = false
		door.mu.Unlock()
		h.probe.setUsed(1 * gib)
		sample()
		if n := r.calls(); n != 0 {
			t.Fatalf("replayed %d times while the child was not ready", n)
		}
		door.mu.Lock()
		door.ready = true
		door.mu.Unlock()
		sample()
		tk, _, _ := mem.Open().Get(context.Background(), ticket)
		if r.calls() != 1 || tk.State != api.TaskQueued || tk.Attempts != 1 || tk.LastError == "" {
			t.Fatalf("after a failed replay: %d calls, task %+v, want queued with 1 attempt", r.calls(), tk)
		}
		time.Sleep(2 * time.Second) // past the 1 s backoff (synctest's clock)
		sample()
		tk, result, _ := mem.Open().Get(context.Background(), ticket)
		if r.calls() != 2 || tk.State != api.TaskDone || string(result) != `{"status":200}` {
			t.Fatalf("after the backoff: %d calls, task %+v result %s, want done with the result", r.calls(), tk, result)
		}
		if r.bodies[0] != "hello" || r.bodies[1] != "hello" {
			t.Fatalf("replayed bodies %q, want the stored one each time", r.bodies)
		}
		answer, n, err := mem.Open().ResultBody(context.Background(), ticket)
		if b, _ := io.ReadAll(answer); err != nil || n != 5 || string(b) != "olleh" {
			t.Fatalf("the stored answer: %q (%d) %v, want the replay's", b, n, err)
		}
		if evs := h.rec.named(api.EventTaskDone); len(evs) != 1 || evs[0].Attempt != 2 {
			t.Fatalf("task_done events %+v", evs)
		}
		if n := h.sup.Status().Leases; n != 0 {
			t.Fatalf("%d leases, want none (a replay takes none)", n)
		}
	})
}

// TestReplayDeadAfterMaxAttempts: replays that keep failing make the task
// dead after max_attempts.
func TestReplayDeadAfterMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := errors.New("the model server did not answer")
		r := &fakeReplayer{errs: []error{fail, fail, fail}}
		h, mem, door := startReplay(t, taskPolicy(func(d *policy.Defer) { d.MaxAttempts = 2 }), r)
		door.mu.Lock()
		door.ready = true
		door.mu.Unlock()
		ticket, err := h.tasks.DeferRequest(context.Background(), json.RawMessage(`{}`), strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			time.Sleep(5 * time.Second)
			sample()
		}
		tk, _, _ := mem.Open().Get(context.Background(), ticket)
		if tk.State != api.TaskDead || tk.Attempts != 2 || r.calls() != 2 {
			t.Fatalf("task %+v after %d replays, want dead after 2", tk, r.calls())
		}
	})
}
