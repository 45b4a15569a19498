package supervisor

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
)

// heldAnswers is a Replayer whose answers' bodies come once released.
type heldAnswers struct {
	mu      sync.Mutex
	started []string
	release chan struct{}
}

func (r *heldAnswers) Replay(_ context.Context, _ json.RawMessage, body io.Reader, _ int64) ([]byte, io.ReadCloser, error) {
	b, _ := io.ReadAll(body)
	r.mu.Lock()
	r.started = append(r.started, string(b))
	r.mu.Unlock()
	pr, pw := io.Pipe()
	go func() {
		<-r.release
		pw.Write([]byte("answer to " + string(b)))
		pw.Close()
	}()
	return []byte(`{"status":200}`), pr, nil
}

func (r *heldAnswers) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.started) }

// TestReplayOneAtATimeWhileStoring: while a replay's answer is written to
// the store, the next deferred request waits (one task at a time), and
// each answer is stored whole.
func TestReplayOneAtATimeWhileStoring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &heldAnswers{release: make(chan struct{})}
		mem, door := memstore.New(), newFakeDoor()
		close(door.drain)
		door.ready = true
		h := startHarness(t, taskPolicy(nil), func(_ *Config, d *Deps) { d.Tasks, d.Door, d.Replayer = mem.Open(), door, r })
		h.child().setOnSignal(func(c *fakeChild, sig syscall.Signal) { c.end(Exit{Code: 0}) })
		h.probe.setUsed(15 * gib) // short: both are deferred, none replayed
		sample()
		var tickets []string
		for _, body := range []string{"one", "two"} {
			tk, err := h.sup.Tasks().DeferRequest(context.Background(), json.RawMessage(`{}`), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		h.probe.setUsed(1 * gib)
		for range 5 {
			sample()
		}
		began := r.count()
		close(r.release)
		if began != 1 {
			t.Errorf("%d replays began while the first answer was being stored, want 1", began)
		}
		for range 5 {
			sample()
		}
		for i, want := range []string{"answer to one", "answer to two"} {
			tk, _, _ := mem.Open().Get(context.Background(), tickets[i])
			body, _, err := mem.Open().ResultBody(context.Background(), tickets[i])
			if err != nil || tk.State != api.TaskDone {
				t.Fatalf("task %d: %+v %v", i, tk, err)
			}
			if b, _ := io.ReadAll(body); string(b) != want {
				t.Errorf("task %d's stored answer %q, want %q", i, b, want)
			}
		}
	})
}
