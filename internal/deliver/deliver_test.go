package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
	"github.com/gpuguard/gpuguard/internal/tasks/memstore"
	"github.com/gpuguard/gpuguard/policy"
)

const gib = 1 << 30

// fakeInstance is the instance as the deliverer sees it: a ledger that
// grants a reservation while the leases fit in room, the journal, the
// replay condition and the [defer] in force. Like the supervisor's loop,
// it tells the deliverer (q) of every lease its ledger lets go.
type fakeInstance struct {
	mu         sync.Mutex
	room       uint64
	leases     map[string]uint64
	n          int
	quiet      []bool // each reservation's quiet flag, in order
	events     []api.Event
	replayable bool
	pol        policy.Defer
	q          *Tasks
}

func (f *fakeInstance) Reserve(_ context.Context, req admission.Request, quiet bool) (admission.Decision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.quiet = append(f.quiet, quiet)
	var used uint64
	for _, b := range f.leases {
		used += b
	}
	if used+req.Bytes > f.room {
		return admission.Decision{Decision: admission.DecisionDefer}, nil
	}
	f.n++
	lease := fmt.Sprintf("l-%d", f.n)
	f.leases[lease] = req.Bytes
	return admission.Decision{Decision: admission.DecisionGPU, Lease: lease}, nil
}

func (f *fakeInstance) Release(_ context.Context, lease string) error {
	if !f.forget(lease) {
		return errors.New("unknown lease")
	}
	f.q.LeaseReleased(lease)
	return nil
}

// forget takes lease out of the ledger without telling the deliverer.
func (f *fakeInstance) forget(lease string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.leases[lease]
	delete(f.leases, lease)
	return ok
}

func (f *fakeInstance) Journal(_ context.Context, ev api.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	return nil
}

func (f *fakeInstance) Replayable() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replayable
}

func (f *fakeInstance) Defer() policy.Defer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pol
}

func (f *fakeInstance) set(mod func(f *fakeInstance)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mod(f)
}

func (f *fakeInstance) named(event string) []api.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []api.Event
	for _, ev := range f.events {
		if ev.Event == event {
			out = append(out, ev)
		}
	}
	return out
}

func (f *fakeInstance) leased() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.leases)
}

// looks are how many reservations were made, and how many of them loud.
func (f *fakeInstance) looks() (all, loud int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.quiet {
		if !q {
			loud++
		}
	}
	return len(f.quiet), loud
}

// newInstance has no room (every task is deferred) and [defer] at its
// defaults.
func newInstance() *fakeInstance {
	return &fakeInstance{leases: map[string]uint64{},
		pol: policy.Defer{AckTimeout: 10 * time.Minute, MaxAttempts: 5, MaxTasks: 100, KeepResults: time.Hour}}
}

// start runs a deliverer made from o over in (fi, or fi seen through a
// wrapper); stop ends its Run and waits for it to return.
func start(t *testing.T, in Instance, fi *fakeInstance, o Options) (q *Tasks, stop func()) {
	o.Logf = t.Logf
	q = New(in, o)
	fi.q = q
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		q.Run(ctx)
		close(done)
	}()
	return q, func() {
		cancel()
		<-done
	}
}

// runWith starts a deliverer as start does and runs it until the test
// ends.
func runWith(t *testing.T, in Instance, fi *fakeInstance, o Options) *Tasks {
	t.Helper()
	q, stop := start(t, in, fi, o)
	t.Cleanup(stop)
	synctest.Wait()
	return q
}

// run starts a deliverer over mem and a new instance, runs it until the
// test ends, and returns its API.
func run(t *testing.T, mem *memstore.Memory, r Replayer) (*Tasks, *fakeInstance) {
	t.Helper()
	fi := newInstance()
	return runWith(t, fi, fi, Options{Store: mem.Open(), Replayer: r}), fi
}

// sink is a subscriber that records its deliveries.
type sink struct {
	mu  sync.Mutex
	got []api.TaskDelivery
	id  int64
}

func subscribe(q *Tasks) *sink {
	s := &sink{}
	s.id, _ = q.SubscribeTasks(func(d api.TaskDelivery) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, d)
		return true
	})
	return s
}

func (s *sink) deliveries() []api.TaskDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]api.TaskDelivery(nil), s.got...)
}

func deferTask(t *testing.T, q *Tasks, tool string) string {
	t.Helper()
	d, ticket, err := q.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: tool}, json.RawMessage(`1`))
	if err != nil || d.Decision != admission.DecisionDefer || ticket == "" {
		t.Fatalf("deferral: %+v %q %v, want defer with a ticket", d, ticket, err)
	}
	return ticket
}

// deferRequest stores a deferred request with body, as the front door
// does, and answers its ticket.
func deferRequest(t *testing.T, q *Tasks, body string) string {
	t.Helper()
	ticket, err := q.DeferRequest(context.Background(), json.RawMessage(`{}`), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return ticket
}

func state(t *testing.T, mem *memstore.Memory, ticket string) api.Task {
	t.Helper()
	tk, _, err := mem.Open().Get(context.Background(), ticket)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// A task is delivered once a Poke finds that its reservation is granted;
// the deferral's reservation is journaled, the deliverer's own looks are
// quiet; a done releases the lease and is journaled.
func TestPokeDeliversOnceAReservationIsGranted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		q, fi := run(t, mem, nil)
		a := deferTask(t, q, "embed")
		s := subscribe(q)
		for range 3 {
			q.Poke()
			synctest.Wait()
		}
		if got := s.deliveries(); len(got) != 0 {
			t.Fatalf("delivered without room: %+v", got)
		}
		if all, loud := fi.looks(); all < 2 || loud != 1 {
			t.Fatalf("%d reservations, %d journaled; want the deferral's alone journaled", all, loud)
		}
		fi.set(func(f *fakeInstance) { f.room = 8 * gib })
		synctest.Wait()
		if got := s.deliveries(); len(got) != 0 {
			t.Fatalf("delivered without a poke: %+v", got)
		}
		q.Poke()
		synctest.Wait()
		got := s.deliveries()
		if len(got) != 1 || got[0].Ticket != a || got[0].Lease == "" || fi.leased() != 1 {
			t.Fatalf("deliveries %+v, leases %d; want %s with its lease", got, fi.leased(), a)
		}
		if c := q.TaskCounts(); c.Running != 1 || c.Queued != 0 {
			t.Fatalf("counts %+v, want one running", c)
		}
		if err := q.TaskDone(context.Background(), s.id, a); err != nil {
			t.Fatal(err)
		}
		if fi.leased() != 0 || state(t, mem, a).State != api.TaskDone {
			t.Fatalf("after done: %d leases, task %s", fi.leased(), state(t, mem, a).State)
		}
		var order []string
		for _, ev := range fi.named(api.EventDeferred) {
			order = append(order, ev.Event)
		}
		for _, ev := range append(fi.named(api.EventTask), fi.named(api.EventTaskDone)...) {
			order = append(order, ev.Event)
		}
		if strings.Join(order, " ") != "deferred task task_done" {
			t.Fatalf("journal %v", order)
		}
	})
}

// The slot of one task at a time is freed when the instance's ledger lets
// the task's lease go and says so (LeaseReleased), not before.
func TestLeaseReleasedFreesTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, fi := run(t, memstore.New(), nil)
		deferTask(t, q, "a")
		b := deferTask(t, q, "b")
		fi.set(func(f *fakeInstance) { f.room = 8 * gib })
		s := subscribe(q)
		synctest.Wait()
		lease := s.deliveries()[0].Lease
		fi.forget(lease) // the ledger's alone
		q.Poke()
		synctest.Wait()
		if n := len(s.deliveries()); n != 1 {
			t.Fatalf("%d deliveries before LeaseReleased, want 1", n)
		}
		q.LeaseReleased(lease)
		synctest.Wait()
		if got := s.deliveries(); len(got) != 2 || got[1].Ticket != b {
			t.Fatalf("deliveries %+v, want %s after the release", got, b)
		}
	})
}

// ChildExited puts the task in flight back, an attempt counted.
func TestChildExitedPutsTheTaskBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		q, fi := run(t, mem, nil)
		a := deferTask(t, q, "a")
		fi.set(func(f *fakeInstance) { f.room = 8 * gib })
		s := subscribe(q)
		synctest.Wait()
		if n := len(s.deliveries()); n != 1 {
			t.Fatalf("%d deliveries, want 1", n)
		}
		q.ChildExited()
		synctest.Wait()
		if st := state(t, mem, a); st.State != api.TaskQueued || st.Attempts != 1 || !strings.Contains(st.LastError, "child exited") {
			t.Fatalf("after the exit: %+v", st)
		}
		if evs := fi.named(api.EventTaskFailed); len(evs) != 1 || evs[0].Ticket != a {
			t.Fatalf("task_failed events %+v", evs)
		}
	})
}

// fakeReplayer records its replays; block, while open, holds each until
// its context ends.
type fakeReplayer struct {
	mu    sync.Mutex
	calls int
	block bool
	ended chan struct{} // closed when a blocked replay's context ended
}

func (r *fakeReplayer) Replay(ctx context.Context, _ json.RawMessage, _ io.Reader, _ int64) ([]byte, io.ReadCloser, error) {
	r.mu.Lock()
	r.calls++
	block := r.block
	r.mu.Unlock()
	if block {
		<-ctx.Done()
		close(r.ended)
		return nil, nil, ctx.Err()
	}
	return []byte(`{"status":200}`), io.NopCloser(strings.NewReader("")), nil
}

func (r *fakeReplayer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// A deferred request is replayed only while the instance says Replayable,
// and takes no reservation.
func TestReplayWaitsForReplayable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		r := &fakeReplayer{}
		q, fi := run(t, mem, r)
		ticket := deferRequest(t, q, "")
		q.Poke()
		synctest.Wait()
		if n := r.count(); n != 0 {
			t.Fatalf("replayed %d times while not replayable", n)
		}
		fi.set(func(f *fakeInstance) { f.replayable = true })
		q.Poke()
		synctest.Wait()
		if n, st := r.count(), state(t, mem, ticket); n != 1 || st.State != api.TaskDone {
			t.Fatalf("%d replays, task %s; want one, done", n, st.State)
		}
		if all, _ := fi.looks(); all != 0 {
			t.Fatalf("%d reservations for a replay, want none", all)
		}
	})
}

// The end of Run's context ends Run, and a replay under way with it.
func TestRunEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		r := &fakeReplayer{block: true, ended: make(chan struct{})}
		fi := newInstance()
		fi.replayable = true
		q, stop := start(t, fi, fi, Options{Store: mem.Open(), Replayer: r})
		deferRequest(t, q, "")
		synctest.Wait()
		if n := r.count(); n != 1 {
			t.Fatalf("%d replays, want one under way", n)
		}
		ended := time.Now()
		stop()
		<-r.ended
		if waited := time.Since(ended); waited > 0 {
			t.Fatalf("the replay ended %s after Run's context, want at once", waited)
		}
	})
}

// The [defer] in force is read at each use: a reload that lowers
// max_tasks holds at the next deferral.
func TestDeferInForce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q, fi := run(t, memstore.New(), nil)
		deferTask(t, q, "a")
		fi.set(func(f *fakeInstance) { f.pol.MaxTasks = 1 })
		d, ticket, err := q.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2", Tool: "b"}, json.RawMessage(`1`))
		if err != nil || d.Decision != admission.DecisionDeny || ticket != "" || !strings.Contains(d.Reason, "full") {
			t.Fatalf("past the reloaded max_tasks: %+v %q %v, want deny", d, ticket, err)
		}
		if evs := fi.named(api.EventAdmission); len(evs) != 1 || evs[0].Decision != admission.DecisionDeny {
			t.Fatalf("admission events %+v, want the deny", evs)
		}
	})
}

// Without a store, Tasks answers as an instance without a queue, and the
// supervisor's calls do nothing.
func TestWithoutAStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fi := &fakeInstance{leases: map[string]uint64{}}
		q := New(fi, Options{})
		fi.q = q
		q.Run(context.Background()) // returns at once
		q.Poke()
		q.LeaseReleased("l-1")
		q.ChildExited()
		if c := q.TaskCounts(); c != (api.TaskCounts{}) {
			t.Fatalf("counts %+v", c)
		}
		d, ticket, err := q.DeferTask(context.Background(), admission.Request{Bytes: gib, Priority: "P2"}, json.RawMessage(`1`))
		if err != nil || d.Decision != admission.DecisionDefer || ticket != "" {
			t.Fatalf("DeferTask: %+v %q %v, want the reservation's defer, no ticket", d, ticket, err)
		}
		if _, err := q.DeferRequest(context.Background(), json.RawMessage(`{}`), strings.NewReader("")); err == nil {
			t.Fatal("DeferRequest without a store was accepted")
		}
	})
}
