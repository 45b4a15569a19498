package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/deliver"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
	"github.com/gpuguard/gpuguard/policy"
)

// taskPolicy is testPolicy with [defer] at its defaults, changed by mod.
func taskPolicy(mod func(*policy.Defer)) *policy.Policy {
	pol := testPolicy()
	pol.Defer = policy.Defer{AckTimeout: 10 * time.Minute, MaxAttempts: 5, MaxTasks: 100, KeepResults: time.Hour}
	if mod != nil {
		mod(&pol.Defer)
	}
	return pol
}

// taskHarness runs a supervisor with an in-memory store, its child up
// and a first sample taken; tasks is its deliverer's API.
type taskHarness struct {
	*harness
	mem   *memstore.Memory
	child *fakeChild
	tasks *deliver.Tasks
}

func startTasks(t *testing.T, pol *policy.Policy, mem *memstore.Memory) *taskHarness {
	t.Helper()
	if mem == nil {
		mem = memstore.New()
	}
	var q *deliver.Tasks
	h := startHarness(t, pol, func(_ *Config, d *Deps) { deliverFrom(&q, d, mem.Open(), nil) })
	th := &taskHarness{harness: h, mem: mem, child: h.child(), tasks: q}
	sample()
	return th
}

// deliverFrom gives the instance a deliverer over store, with the front
// door's replayer r (nil: none), as cmd does, and keeps its API in *q.
func deliverFrom(q **deliver.Tasks, d *Deps, store deliver.Store, r deliver.Replayer) {
	d.Tasks = func(in *TaskHost) Deliverer {
		*q = deliver.New(in, deliver.Options{Store: store, Replayer: r, Logf: d.Logf})
		return *q
	}
}

// sample lets a sample or two be taken and acted on.
func sample() {
	synctest.Wait()
	time.Sleep(200 * time.Millisecond)
	synctest.Wait()
}

// sink is a task subscriber that records its deliveries.
type sink struct {
	mu     sync.Mutex
	got    []api.TaskDelivery
	id     int64
	cancel func()
	broken bool // deliveries fail (the connection is gone)
}

func (h *taskHarness) subscribe() *sink {
	s := &sink{}
	s.id, s.cancel = h.tasks.SubscribeTasks(func(t api.TaskDelivery) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.broken {
			return false
		}
		s.got = append(s.got, t)
		return true
	})
	return s
}

func (s *sink) deliveries() []api.TaskDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.TaskDelivery(nil), s.got...)
}

func (h *taskHarness) deferTask(t *testing.T, tool string, bytes uint64) string {
	t.Helper()
	d, ticket, err := h.tasks.DeferTask(context.Background(), admission.Request{Bytes: bytes, Priority: "P2", Tool: tool, TTL: time.Minute},
		json.RawMessage(`{"tool":"`+tool+`"}`))
	if err != nil || d.Decision != admission.DecisionDefer || len(ticket) < 32 {
		t.Fatalf("deferral: %+v ticket %q %v, want defer with a ticket", d, ticket, err)
	}
	return ticket
}

func (h *taskHarness) state(t *testing.T, ticket string) api.Task {
	t.Helper()
	tk, _, err := h.mem.Open().Get(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestTaskDeferredThenDeliveredWhenMemoryFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib) // above high: P2 is deferred
		sample()
		a := h.deferTask(t, "embed", 2*gib)
		b := h.deferTask(t, "rerank", 1*gib)
		if st := h.state(t, a); st.State != api.TaskQueued || st.Tool != "embed" || string(st.Payload) != `{"tool":"embed"}` {
			t.Fatalf("stored %+v", st)
		}
		if evs := h.rec.named(api.EventDeferred); len(evs) != 2 || evs[0].Ticket != a || evs[0].Tool != "embed" {
			t.Fatalf("deferred events %+v", evs)
		}
		if n := h.sup.Status().Tasks; n != 2 {
			t.Fatalf("status tasks %d, want 2", n)
		}
		s := h.subscribe()
		sample()
		if got := s.deliveries(); len(got) != 0 {
			t.Fatalf("delivered while memory is short: %+v", got)
		}
		h.probe.setUsed(1 * gib)
		sample()
		got := s.deliveries()
		if len(got) != 1 || got[0].Ticket != a || got[0].Attempt != 1 || got[0].Lease == "" || got[0].Bytes != 2*gib ||
			got[0].Tool != "embed" || got[0].Priority != "P2" || string(got[0].Payload) != `{"tool":"embed"}` {
			t.Fatalf("deliveries %+v, want the oldest (%s) alone, attempt 1, with a lease", got, a)
		}
		if st := h.sup.Status(); st.Leases != 1 || st.Tasks != 2 {
			t.Fatalf("status leases %d tasks %d, want the task's lease and 2 tasks", st.Leases, st.Tasks)
		}
		if evs := h.rec.named(api.EventTask); len(evs) != 1 || evs[0].Attempt != 1 || evs[0].WaitSeconds <= 0 {
			t.Fatalf("task events %+v", evs)
		}
		// One at a time: the second waits for the first.
		sample()
		if n := len(s.deliveries()); n != 1 {
			t.Fatalf("%d deliveries with one in flight", n)
		}
		if err := h.tasks.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		if st := h.state(t, a); st.State != api.TaskDone {
			t.Fatalf("after done: %s", st.State)
		}
		sample()
		got = s.deliveries()
		if len(got) != 2 || got[1].Ticket != b {
			t.Fatalf("after done: deliveries %+v, want %s next", got, b)
		}
		if err := h.tasks.TaskDone(context.Background(), s.id, b); err != nil {
			t.Fatal(err)
		}
		if st := h.sup.Status(); st.Leases != 0 || st.Tasks != 0 {
			t.Fatalf("status leases %d tasks %d after both done", st.Leases, st.Tasks)
		}
		if n := len(h.rec.named(api.EventTaskDone)); n != 2 {
			t.Fatalf("%d task_done events", n)
		}
		// A done task is finished for good.
		if err := h.tasks.TaskDone(context.Background(), s.id, a); err == nil {
			t.Fatal("a second done was accepted")
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// A released lease frees the one-at-a-time slot: the next task goes, while
// the released one stays delivered to its connection until it is done.
func TestTaskReleasedLeaseLetsTheNextGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "embed", 2*gib)
		b := h.deferTask(t, "rerank", gib)
		c := h.deferTask(t, "ocr", gib)
		s := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		got := s.deliveries()
		if len(got) != 1 || got[0].Ticket != a {
			t.Fatalf("deliveries %+v, want %s alone", got, a)
		}
		ctx := context.Background()
		if err := h.sup.Admission().Release(ctx, got[0].Lease); err != nil {
			t.Fatal(err)
		}
		sample()
		got = s.deliveries()
		if len(got) != 2 || got[1].Ticket != b || got[1].Attempt != 1 {
			t.Fatalf("after the release: deliveries %+v, want %s next", got, b)
		}
		if st := h.sup.Status(); st.Leases != 1 || st.Tasks != 3 {
			t.Fatalf("status leases %d tasks %d, want b's lease and 3 tasks", st.Leases, st.Tasks)
		}
		// b holds the slot (its lease is not released): c waits, a's done
		// included.
		if err := h.tasks.TaskDone(ctx, s.id, a); err != nil {
			t.Fatalf("done for the released task: %v", err)
		}
		if st := h.state(t, a); st.State != api.TaskDone || st.Attempts != 0 {
			t.Fatalf("a after done: %+v", st)
		}
		sample()
		if n := len(s.deliveries()); n != 2 {
			t.Fatalf("%d deliveries with b in flight", n)
		}
		if err := h.tasks.TaskDone(ctx, s.id, b); err != nil {
			t.Fatal(err)
		}
		sample()
		if got = s.deliveries(); len(got) != 3 || got[2].Ticket != c {
			t.Fatalf("after b done: deliveries %+v, want %s", got, c)
		}
		if n := len(h.rec.named(api.EventTaskFailed)); n != 0 {
			t.Fatalf("%d task_failed events", n)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// A released task is still its connection's: the connection's close puts
// it back (an attempt), after ack_timeout too.
func TestTaskReleasedStaysDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(func(d *policy.Defer) { d.AckTimeout = 30 * time.Second }), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		b := h.deferTask(t, "y", gib)
		s := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		ctx := context.Background()
		if err := h.sup.Admission().Release(ctx, s.deliveries()[0].Lease); err != nil {
			t.Fatal(err)
		}
		sample()
		if got := s.deliveries(); len(got) != 2 || got[1].Ticket != b {
			t.Fatalf("deliveries %+v, want %s after the release", got, b)
		}
		if err := h.tasks.TaskDone(ctx, s.id, b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second) // past a's ack_timeout, within its backoff
		synctest.Wait()
		if st := h.state(t, a); st.State != api.TaskQueued || st.Attempts != 1 || !strings.Contains(st.LastError, "ack_timeout") {
			t.Fatalf("a after its ack_timeout: %+v", st)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		got := s.deliveries()
		if len(got) != 3 || got[2].Ticket != a || got[2].Attempt != 2 {
			t.Fatalf("deliveries %+v, want %s again, attempt 2", got, a)
		}
		if err := h.sup.Admission().Release(ctx, got[2].Lease); err != nil {
			t.Fatal(err)
		}
		s.cancel()
		synctest.Wait()
		if st := h.state(t, a); st.State != api.TaskQueued || st.Attempts != 2 || !strings.Contains(st.LastError, "connection closed") {
			t.Fatalf("a after its connection closed: %+v", st)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// The deliverer never journals the defer decisions of its own looks.
func TestTaskLooksAreNotJournaled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib)
		sample()
		h.deferTask(t, "x", gib)
		h.subscribe()
		for range 10 {
			sample()
		}
		if n := len(h.rec.named(api.EventAdmission)); n != 1 {
			t.Fatalf("%d admission events, want the deferral's alone", n)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

func TestTaskDoneAndFailedCheckTheConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		s := h.subscribe()
		other := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		ctx := context.Background()
		if err := h.tasks.TaskDone(ctx, other.id, a); err == nil || !strings.Contains(err.Error(), "not delivered to this connection") {
			t.Fatalf("done from another connection: %v", err)
		}
		if err := h.tasks.TaskFailed(ctx, s.id, "t-unknown", "x"); err == nil || !strings.Contains(err.Error(), "not in flight") {
			t.Fatalf("failed for an unknown ticket: %v", err)
		}
		if err := h.tasks.TaskDone(ctx, s.id, a); err != nil {
			t.Fatal(err)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

func TestTaskFailedBacksOffThenDies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(func(d *policy.Defer) { d.MaxAttempts = 2 }), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		s := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		ctx := context.Background()
		if err := h.tasks.TaskFailed(ctx, s.id, a, "boom"); err != nil {
			t.Fatal(err)
		}
		if st := h.state(t, a); st.State != api.TaskQueued || st.Attempts != 1 || !strings.Contains(st.LastError, "boom") {
			t.Fatalf("after failed: %+v", st)
		}
		if st := h.sup.Status(); st.Leases != 0 {
			t.Fatalf("the failed task's lease is still held (%d)", st.Leases)
		}
		time.Sleep(500 * time.Millisecond) // within the first backoff (1 s)
		synctest.Wait()
		if n := len(s.deliveries()); n != 1 {
			t.Fatalf("%d deliveries during the backoff", n)
		}
		time.Sleep(600 * time.Millisecond)
		synctest.Wait()
		got := s.deliveries()
		if len(got) != 2 || got[1].Attempt != 2 {
			t.Fatalf("after the backoff: %+v, want attempt 2", got)
		}
		if err := h.tasks.TaskFailed(ctx, s.id, a, "boom again"); err != nil {
			t.Fatal(err)
		}
		if st := h.state(t, a); st.State != api.TaskDead || st.Attempts != 2 {
			t.Fatalf("after max_attempts: %+v, want dead", st)
		}
		if evs := h.rec.named(api.EventTaskDead); len(evs) != 1 || evs[0].Ticket != a {
			t.Fatalf("task_dead events %+v", evs)
		}
		if n := len(h.rec.named(api.EventTaskFailed)); n != 2 {
			t.Fatalf("%d task_failed events, want 2", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(s.deliveries()); n != 2 {
			t.Fatalf("a dead task was delivered (%d deliveries)", n)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// A delivery not finished within ack_timeout goes back (an attempt) and
// is delivered again; its lease ends.
func TestTaskAckTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(func(d *policy.Defer) { d.AckTimeout = 30 * time.Second }), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		s := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if n := len(s.deliveries()); n != 1 {
			t.Fatalf("%d deliveries before the timeout", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		sample()
		got := s.deliveries()
		if len(got) != 2 || got[1].Ticket != a || got[1].Attempt != 2 || got[1].Lease == got[0].Lease {
			t.Fatalf("after ack_timeout: %+v, want a second delivery with a new lease", got)
		}
		if err := h.tasks.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// A subscriber whose connection closes gives its task back; another gets it.
func TestTaskConnectionClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		first := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		if len(first.deliveries()) != 1 {
			t.Fatal("not delivered")
		}
		second := h.subscribe()
		first.cancel()
		sample()
		sample() // past the 1 s backoff? no: a closed connection is no failure of the task's own
		time.Sleep(time.Second)
		synctest.Wait()
		got := second.deliveries()
		if len(got) != 1 || got[0].Ticket != a || got[0].Attempt != 2 {
			t.Fatalf("second subscriber got %+v, want %s, attempt 2", got, a)
		}
		if st := h.sup.Status(); st.Leases != 1 {
			t.Fatalf("leases %d, want the redelivery's alone", st.Leases)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// The child's exit ends the task's lease, and the task goes back.
func TestTaskChildExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		s := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		h.child.end(Exit{Code: 1}) // a crash: restarted after backoff
		synctest.Wait()
		if st := h.state(t, a); st.State != api.TaskQueued || st.Attempts != 1 || !strings.Contains(st.LastError, "child exited") {
			t.Fatalf("after the child's exit: %+v", st)
		}
		c := h.harness.child()
		sample()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := s.deliveries(); len(got) != 2 || got[1].Attempt != 2 {
			t.Fatalf("after the restart: %+v", got)
		}
		c.end(Exit{})
		h.wait()
	})
}

// Tasks left running by a gpuguard that died are put back at start.
func TestTaskRecoveredAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		st := mem.Open()
		ctx := context.Background()
		st.Enqueue(ctx, api.Task{Ticket: "t-left", Tool: "x", Priority: "P2", Bytes: gib, Enqueued: time.Now()}, 10)
		if _, err := st.Lease(ctx, "t-left", time.Now()); err != nil {
			t.Fatal(err)
		}
		h := startTasks(t, taskPolicy(nil), mem)
		s := h.subscribe()
		sample()
		got := s.deliveries()
		if len(got) != 1 || got[0].Ticket != "t-left" || got[0].Attempt != 2 {
			t.Fatalf("after a restart: %+v, want t-left again, attempt 2", got)
		}
		if evs := h.rec.named(api.EventTaskFailed); len(evs) != 1 || !strings.Contains(evs[0].Detail, "in flight") {
			t.Fatalf("task_failed events %+v", evs)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// A store that cannot be written: the deferral is a deny with the
// reason, no ticket; the instance goes on.
func TestTaskStoreFailureDenies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := startTasks(t, taskPolicy(nil), nil)
		h.probe.setUsed(15 * gib)
		sample()
		h.mem.Fail(memstore.ErrFailing)
		d, ticket, err := h.tasks.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: "x"}, json.RawMessage(`1`))
		if err != nil || d.Decision != admission.DecisionDeny || ticket != "" || !strings.Contains(d.Reason, "no space left") {
			t.Fatalf("with the store failing: %+v ticket %q %v, want deny naming the cause and no ticket", d, ticket, err)
		}
		evs := h.rec.named(api.EventAdmission)
		if last := evs[len(evs)-1]; last.Decision != admission.DecisionDeny {
			t.Fatalf("last admission event %+v, want the deny", last)
		}
		h.mem.Fail(nil)
		h.deferTask(t, "x", gib) // works again once the store does
		// max_tasks: a full queue is a deny too.
		full := startTasks(t, taskPolicy(func(d *policy.Defer) { d.MaxTasks = 1 }), nil)
		full.probe.setUsed(15 * gib)
		sample()
		full.deferTask(t, "x", gib)
		d, ticket, _ = full.tasks.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: "x"}, json.RawMessage(`1`))
		if d.Decision != admission.DecisionDeny || ticket != "" || !strings.Contains(d.Reason, "full") {
			t.Fatalf("past max_tasks: %+v %q", d, ticket)
		}
		// Without a payload, a reserve is answered as ever.
		d, _ = h.sup.Admission().Reserve(context.Background(), admission.Request{Bytes: gib, Priority: "P2"})
		if d.Decision != admission.DecisionDefer {
			t.Fatalf("reserve without payload: %+v", d)
		}
		h.child.end(Exit{})
		h.wait()
		full.child.end(Exit{})
		full.wait()
	})
}

// The window: tasks are delivered from its start (inclusive) to its end
// (exclusive), local time, and it may wrap midnight.
func TestTaskWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		// Open from one hour from now, for two hours; the bubble's clock
		// starts at midnight, so a window starting before it wraps.
		start := now.Add(time.Hour).Truncate(time.Minute)
		m := func(t time.Time) int { return t.Hour()*60 + t.Minute() }
		w := policy.Window{Start: m(start), End: (m(start) + 120) % 1440, Set: true}
		pol := taskPolicy(func(d *policy.Defer) { d.Window = w })
		pol.Watch.Interval = 5 * time.Second // a day of samples stays quick
		h := startTasks(t, pol, nil)
		sample := func() {
			time.Sleep(6 * time.Second)
			synctest.Wait()
		}
		h.probe.setUsed(15 * gib)
		sample()
		a := h.deferTask(t, "x", gib)
		s := h.subscribe()
		h.probe.setUsed(gib)
		sample()
		time.Sleep(time.Until(start) - time.Nanosecond)
		synctest.Wait()
		if n := len(s.deliveries()); n != 0 {
			t.Fatalf("delivered before the window (%d)", n)
		}
		time.Sleep(time.Nanosecond) // the start is inclusive
		synctest.Wait()
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != a {
			t.Fatalf("at the window's start: %+v", got)
		}
		if err := h.tasks.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(start.Add(2 * time.Hour))) // the end is exclusive
		synctest.Wait()
		h.probe.setUsed(15 * gib)
		sample()
		b := h.deferTask(t, "x", gib)
		h.probe.setUsed(gib)
		sample()
		if n := len(s.deliveries()); n != 1 {
			t.Fatalf("delivered after the window closed (%d)", n)
		}
		time.Sleep(time.Until(start.Add(24 * time.Hour))) // it opens again the next day
		synctest.Wait()
		if got := s.deliveries(); len(got) != 2 || got[1].Ticket != b {
			t.Fatalf("the next day: %+v", got)
		}
		h.child.end(Exit{})
		h.wait()
	})
}

// A store that fails is asked again after a while, not at every sample,
// and its failure is logged once, then its recovery once.
func TestTaskStoreDownLogsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		var mu sync.Mutex
		var logged []string
		var q *deliver.Tasks
		h := startHarness(t, taskPolicy(nil), func(_ *Config, d *Deps) {
			d.Logf = func(f string, a ...any) {
				mu.Lock()
				logged = append(logged, fmt.Sprintf(f, a...))
				mu.Unlock()
			}
			deliverFrom(&q, d, mem.Open(), nil)
		})
		th := &taskHarness{harness: h, mem: mem, child: h.child(), tasks: q}
		sample()
		th.probe.setUsed(15 * gib)
		sample()
		a := th.deferTask(t, "x", gib)
		s := th.subscribe()
		mem.Fail(memstore.ErrFailing)
		th.probe.setUsed(gib)
		for range 20 {
			sample()
		}
		count := func(sub string) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, l := range logged {
				if strings.Contains(l, sub) {
					n++
				}
			}
			return n
		}
		if n := count("no space left"); n != 1 {
			t.Fatalf("the failure was logged %d times over 20 samples, want once", n)
		}
		mem.Fail(nil)
		time.Sleep(time.Second)
		synctest.Wait()
		sample()
		if got := s.deliveries(); len(got) != 1 || got[0].Ticket != a {
			t.Fatalf("after the store came back: %+v", got)
		}
		if n := count("answers again"); n != 1 {
			t.Fatalf("the recovery was logged %d times", n)
		}
		th.child.end(Exit{})
		th.wait()
	})
}

// Without a store, Tasks is still there and answers as an instance
// without a queue: no counts, a reservation with a payload decided as one
// without (no ticket), a subscription that delivers nothing, and done,
// failed, a note and a deferred request refused.
func TestTasksWithoutAStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var q *deliver.Tasks
		h := startHarness(t, taskPolicy(nil), func(_ *Config, d *Deps) { deliverFrom(&q, d, nil, nil) })
		c := h.child()
		sample()
		if q == nil || q.TaskCounts() != (api.TaskCounts{}) || h.sup.Status().Tasks != 0 {
			t.Fatalf("Tasks %v, counts %+v, status tasks %d: want zero counts", q, q.TaskCounts(), h.sup.Status().Tasks)
		}
		h.probe.setUsed(15 * gib)
		sample()
		d, ticket, err := q.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: "x"}, json.RawMessage(`1`))
		if err != nil || d.Decision != admission.DecisionDefer || ticket != "" {
			t.Fatalf("DeferTask without a store: %+v ticket %q %v, want the reservation's defer and no ticket", d, ticket, err)
		}
		id, cancel := q.SubscribeTasks(func(api.TaskDelivery) bool { t.Error("a delivery without a store"); return true })
		cancel()
		if id != 0 {
			t.Errorf("subscription id %d, want 0", id)
		}
		ctx := context.Background()
		for name, err := range map[string]error{
			"done":   q.TaskDone(ctx, 0, "t-x"),
			"failed": q.TaskFailed(ctx, 0, "t-x", "boom"),
			"note":   q.NoteTask(ctx, api.Event{}),
		} {
			if err == nil || !strings.Contains(err.Error(), "no deferred-task queue") {
				t.Errorf("%s without a store: %v", name, err)
			}
		}
		if ticket, err := q.DeferRequest(ctx, json.RawMessage(`{}`), strings.NewReader("")); err == nil || ticket != "" {
			t.Errorf("DeferRequest without a store: %q, %v", ticket, err)
		}
		c.end(Exit{})
		h.wait()
	})
}
