package deliver

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
)

// heldWrites is a store whose write named hold (Enqueue, Ack or Lease),
// once armed, waits after the store committed it until released: the
// moment between a store write and the deliverer's count of it.
type heldWrites struct {
	Store
	hold    string
	armed   atomic.Bool
	release chan struct{}
}

func (h *heldWrites) wait(name string) {
	if h.hold == name && h.armed.Load() {
		<-h.release
	}
}

func (h *heldWrites) Enqueue(ctx context.Context, t api.Task, maxTasks int) error {
	defer h.wait("Enqueue")
	return h.Store.Enqueue(ctx, t, maxTasks)
}

func (h *heldWrites) Ack(ctx context.Context, ticket string, result []byte, now time.Time) error {
	defer h.wait("Ack")
	return h.Store.Ack(ctx, ticket, result, now)
}

func (h *heldWrites) Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error) {
	defer h.wait("Lease")
	return h.Store.Lease(ctx, ticket, now)
}

// A re-read of the counts (a `gpuguard tasks` note) that falls between a
// store write and the deliverer's own count of it does not count that task
// twice, and what it was to learn is learnt once the write is counted:
// here a task that another process stored meanwhile, too big to go. The
// writes: a deferral and a done (a connection's), a deferral the store
// refuses (after which nothing else pokes the deliverer), a delivery (the
// deliverer's own).
func TestCountsRereadDuringAWrite(t *testing.T) {
	for _, tc := range []struct {
		name, hold string
		delivered  bool // a is running before the write
		full       bool // max_tasks is reached, and memory short, before the write
		write      func(t *testing.T, q *Tasks, s *sink, a string) *sink
		want       api.TaskCounts
	}{
		{"deferral", "Enqueue", true, false, func(t *testing.T, q *Tasks, s *sink, _ string) *sink {
			if d, _, err := q.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: "b"}, json.RawMessage(`1`)); err != nil || d.Decision != admission.DecisionDefer {
				t.Errorf("deferral: %+v %v", d, err)
			}
			return s
		}, api.TaskCounts{Running: 1, Queued: 2}},
		{"done", "Ack", true, false, func(t *testing.T, q *Tasks, s *sink, a string) *sink {
			if err := q.TaskDone(context.Background(), s.id, a); err != nil {
				t.Error(err)
			}
			return s
		}, api.TaskCounts{Queued: 1, Done: 1}},
		{"refused deferral", "Enqueue", false, true, func(t *testing.T, q *Tasks, _ *sink, _ string) *sink {
			if d, _, err := q.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: "b"}, json.RawMessage(`1`)); err != nil || d.Decision != admission.DecisionDeny {
				t.Errorf("deferral past max_tasks: %+v %v, want deny", d, err)
			}
			return nil
		}, api.TaskCounts{Queued: 2}},
		{"delivery", "Lease", false, false, func(t *testing.T, q *Tasks, _ *sink, _ string) *sink {
			return subscribe(q)
		}, api.TaskCounts{Running: 1, Queued: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fi := newInstance()
				mem := memstore.New()
				h := &heldWrites{Store: mem.Open(), hold: tc.hold, release: make(chan struct{})}
				q := runWith(t, fi, fi, Options{Store: h})
				a := deferTask(t, q, "a")
				fi.set(func(f *fakeInstance) { f.room = gib })
				var s *sink
				if tc.delivered {
					s = subscribe(q)
					synctest.Wait()
					if c := q.TaskCounts(); c != (api.TaskCounts{Running: 1}) {
						t.Fatalf("counts %+v before, want one running", c)
					}
				}
				if tc.full {
					fi.set(func(f *fakeInstance) { f.room, f.pol.MaxTasks = 0, 1 })
				}
				h.armed.Store(true)
				done := make(chan *sink)
				go func() { done <- tc.write(t, q, s, a) }()
				synctest.Wait() // the write is committed, and not yet counted
				big := api.Task{Ticket: "t-big", Tool: "big", Priority: "P2", Bytes: 2 * gib, Payload: json.RawMessage(`1`), Enqueued: time.Now()}
				if err := mem.Open().Enqueue(context.Background(), big, 100); err != nil {
					t.Fatal(err)
				}
				if err := q.NoteTask(context.Background(), api.Event{}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // the pass it pokes finds the write open still
				close(h.release)
				s = <-done
				synctest.Wait()
				if c := q.TaskCounts(); c != tc.want {
					t.Fatalf("counts %+v, want %+v", c, tc.want)
				}
				if s == nil {
					return
				}
				if got := s.deliveries(); len(got) != 1 || got[0].Ticket != a {
					t.Fatalf("deliveries %+v, want %s alone", got, a)
				}
			})
		})
	}
}
