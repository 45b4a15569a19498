package supervisor

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/deliver"
	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
)

// countingStore counts the store calls that make a commit of their own
// on SQLite (Lease, Ack, AckLease), and the Peeks (a read transaction).
type countingStore struct {
	tasks.Store
	mu                          sync.Mutex
	peek, lease, ack, ackLeases int
	failAckLease                error // AckLease answers it, doing nothing
}

func (c *countingStore) Peek(ctx context.Context, now time.Time) (api.Task, bool, time.Time, error) {
	c.mu.Lock()
	c.peek++
	c.mu.Unlock()
	return c.Store.Peek(ctx, now)
}

func (c *countingStore) peeks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peek
}

func (c *countingStore) Lease(ctx context.Context, ticket string, now time.Time) (api.Task, error) {
	c.mu.Lock()
	c.lease++
	c.mu.Unlock()
	return c.Store.Lease(ctx, ticket, now)
}

func (c *countingStore) Ack(ctx context.Context, ticket string, result []byte, now time.Time) error {
	c.mu.Lock()
	c.ack++
	c.mu.Unlock()
	return c.Store.Ack(ctx, ticket, result, now)
}

func (c *countingStore) AckLease(ctx context.Context, ticket string, result []byte, next string, now time.Time) (api.Task, bool, api.Task, error) {
	c.mu.Lock()
	c.ackLeases++
	err := c.failAckLease
	c.mu.Unlock()
	if err != nil {
		return api.Task{}, false, api.Task{}, err
	}
	return c.Store.AckLease(ctx, ticket, result, next, now)
}

func (c *countingStore) counts() (lease, ack, ackLease int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lease, c.ack, c.ackLeases
}

// countedTaskHarness is an instance with a memory store counted by
// countingStore, its child running with 15 GiB used, sampled twice (the
// tasks' tests' start).
func countedTaskHarness(t *testing.T) (*harness, *taskHarness, *countingStore) {
	mem := memstore.New()
	cs := &countingStore{Store: mem.Open()}
	var q *deliver.Tasks
	h := startHarness(t, taskPolicy(nil), func(_ *Config, d *Deps) { deliverFrom(&q, d, cs, nil) })
	th := &taskHarness{harness: h, mem: mem, child: h.child(), tasks: q}
	sample()
	h.probe.setUsed(15 * gib)
	sample()
	return h, th, cs
}

// A done leases the next task in its own commit: a queue delivered to one
// subscriber costs one store write per task (AckLease), not two (Ack, then
// Lease), and no Peek where the last AckLease told the next task; the
// journal still tells each done before the next delivery.
func TestTaskDoneLeasesTheNextInItsCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, th, cs := countedTaskHarness(t)
		var tickets []string
		for _, tool := range []string{"a", "b", "c"} {
			tickets = append(tickets, th.deferTask(t, tool, gib))
		}
		s := th.subscribe()
		h.probe.setUsed(1 * gib)
		sample()
		for i, ticket := range tickets {
			got := s.deliveries()
			if len(got) != i+1 || got[i].Ticket != ticket || got[i].Lease == "" || string(got[i].Payload) != `{"tool":"`+got[i].Tool+`"}` {
				t.Fatalf("deliveries %+v, want %d, the last %s with its lease and payload", got, i+1, ticket)
			}
			peeks := cs.peeks()
			if err := th.tasks.TaskDone(context.Background(), s.id, ticket); err != nil {
				t.Fatal(err)
			}
			// b's done leases c, told due after b by a's: no Peek.
			if n := cs.peeks() - peeks; i == 1 && n != 0 {
				t.Fatalf("the done of b took %d Peeks, want none", n)
			}
			if st := th.state(t, ticket); st.State != api.TaskDone {
				t.Fatalf("%s after its done: %s", ticket, st.State)
			}
			sample()
		}
		if lease, ack, ackLease := cs.counts(); lease != 1 || ackLease != 2 || ack != 1 {
			t.Fatalf("Lease %d, Ack %d, AckLease %d; want the first lease alone, two dones leasing the next, one last ack", lease, ack, ackLease)
		}
		var order []string
		for _, ev := range h.rec.all() {
			if ev.Event == api.EventTask || ev.Event == api.EventTaskDone {
				order = append(order, ev.Event+" "+ev.Tool)
			}
		}
		want := []string{"task a", "task_done a", "task b", "task_done b", "task c", "task_done c"}
		if len(order) != len(want) {
			t.Fatalf("journal %v, want %v", order, want)
		}
		for i := range want {
			if order[i] != want[i] {
				t.Fatalf("journal %v, want %v", order, want)
			}
		}
		if st := h.sup.Status(); st.Leases != 0 || st.Tasks != 0 {
			t.Fatalf("status leases %d tasks %d after all done", st.Leases, st.Tasks)
		}
		th.child.end(Exit{})
		h.wait()
	})
}

// A next task that does not fit beside the lease of the one just done
// (released only once its done is durable) is not leased by the done: it
// goes once the lease is released, by the deliverer's next pass.
func TestTaskDoneNextNotFittingGoesAfterTheRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, th, cs := countedTaskHarness(t)
		a := th.deferTask(t, "a", 8*gib)
		b := th.deferTask(t, "b", 8*gib)
		s := th.subscribe()
		h.probe.setUsed(1 * gib)
		sample()
		if err := th.tasks.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		sample()
		got := s.deliveries()
		if len(got) != 2 || got[1].Ticket != b {
			t.Fatalf("deliveries %+v, want %s after %s", got, b, a)
		}
		if lease, ack, ackLease := cs.counts(); lease != 2 || ack != 1 || ackLease != 0 {
			t.Fatalf("Lease %d, Ack %d, AckLease %d; want two leases and a plain ack", lease, ack, ackLease)
		}
		if st := h.sup.Status(); st.Leases != 1 {
			t.Fatalf("status leases %d, want b's alone", st.Leases)
		}
		th.child.end(Exit{})
		h.wait()
	})
}

// A done whose AckLease fails leaves its task in flight, its lease held
// (done may be sent again), and the next task queued, its reservation let
// go; the done sent again finishes it and the next goes.
func TestTaskDoneLeasingFailsKeepsTheTaskInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, th, cs := countedTaskHarness(t)
		a := th.deferTask(t, "a", gib)
		b := th.deferTask(t, "b", gib)
		s := th.subscribe()
		h.probe.setUsed(1 * gib)
		sample()
		cs.mu.Lock()
		cs.failAckLease = memstore.ErrFailing
		cs.mu.Unlock()
		if err := th.tasks.TaskDone(context.Background(), s.id, a); err == nil {
			t.Fatal("a done the store could not record was accepted")
		}
		sample()
		if st := th.state(t, a); st.State != api.TaskRunning {
			t.Fatalf("a after a failed done: %s, want running", st.State)
		}
		if st := th.state(t, b); st.State != api.TaskQueued {
			t.Fatalf("b after a failed done: %s, want queued", st.State)
		}
		if got := s.deliveries(); len(got) != 1 {
			t.Fatalf("deliveries %+v, want a alone", got)
		}
		if st := h.sup.Status(); st.Leases != 1 {
			t.Fatalf("status leases %d, want a's alone (b's reservation let go)", st.Leases)
		}
		cs.mu.Lock()
		cs.failAckLease = nil
		cs.mu.Unlock()
		if err := th.tasks.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		sample()
		if got := s.deliveries(); len(got) != 2 || got[1].Ticket != b {
			t.Fatalf("deliveries %+v, want b after a", got)
		}
		if st := th.state(t, a); st.State != api.TaskDone {
			t.Fatalf("a after its done: %s", st.State)
		}
		th.child.end(Exit{})
		h.wait()
	})
}
