package deliver

import (
	"context"
	"encoding/json"
	"io"
	"sync"
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

// TestReplayOneAtATimeWhileStoring: each deferred request's body is
// replayed as stored; while a replay's answer is written to the store the
// next deferred request waits (one task at a time); each answer is stored
// whole.
func TestReplayOneAtATimeWhileStoring(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		r := &heldAnswers{release: make(chan struct{})}
		q, fi := run(t, mem, r)
		var tickets []string
		for _, body := range []string{"one", "two"} {
			tickets = append(tickets, deferRequest(t, q, body))
		}
		fi.set(func(f *fakeInstance) { f.replayable = true })
		for range 3 {
			q.Poke()
			synctest.Wait()
		}
		began := r.count()
		close(r.release)
		if began != 1 {
			t.Errorf("%d replays began while the first answer was being stored, want 1", began)
		}
		for range 3 {
			q.Poke()
			synctest.Wait()
		}
		for i, want := range []string{"answer to one", "answer to two"} {
			body, _, err := mem.Open().ResultBody(context.Background(), tickets[i])
			if st := state(t, mem, tickets[i]); err != nil || st.State != api.TaskDone {
				t.Fatalf("task %d: %s %v", i, st.State, err)
			}
			if b, _ := io.ReadAll(body); string(b) != want {
				t.Errorf("task %d's stored answer %q, want %q", i, b, want)
			}
		}
		if r.started[0] != "one" || r.started[1] != "two" {
			t.Errorf("replayed bodies %q, want the stored ones in order", r.started)
		}
	})
}
