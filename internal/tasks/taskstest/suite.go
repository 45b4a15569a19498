package taskstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// Opener opens the store under test. Calling it again must open the same
// queue anew (a restart): what was stored must still be there.
type Opener func(t *testing.T) tasks.Store

// NewOpener makes an Opener for one test; every test gets a fresh queue.
type NewOpener func(t *testing.T) Opener

// Run runs the conformance suite against the stores newOpener makes. The
// times a test passes start at the wall clock (a Redis server measures
// idle times itself) and move forward from there.
func Run(t *testing.T, newOpener NewOpener) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"DuplicateEnqueue", testDuplicateEnqueue},
		{"OldestFirst", testOldestFirst},
		{"LeaseIsExclusive", testLeaseIsExclusive},
		{"LeaseExpiry", testLeaseExpiry},
		{"Extend", testExtend},
		{"Ack", testAck},
		{"AckLease", testAckLease},
		{"FailAndBackoff", testFailAndBackoff},
		{"MaxAttemptsAndDead", testMaxAttemptsAndDead},
		{"KeepResults", testKeepResults},
		{"MaxTasks", testMaxTasks},
		{"Drop", testDrop},
		{"Recover", testRecover},
		{"Durable", testDurable},
	}
	for _, c := range append(cases, bodyCases...) {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newOpener(t)) })
	}
}

// task is a task enqueued at at.
func task(i int, at time.Time) api.Task {
	return api.Task{Ticket: fmt.Sprintf("t-%d-%d", at.UnixNano(), i), Tool: fmt.Sprintf("tool%d", i), Priority: "P2",
		Bytes: uint64(1<<20 + i), Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Enqueued: at}
}

// clock is the wall clock at the resolution every store keeps (Redis
// keeps microseconds).
func clock() time.Time { return time.Now().Truncate(time.Millisecond) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func enqueue(t *testing.T, s tasks.Store, ts ...api.Task) {
	t.Helper()
	for _, tk := range ts {
		must(t, s.Enqueue(context.Background(), tk, 1000))
	}
}

func peek(t *testing.T, s tasks.Store, now time.Time) (api.Task, bool, time.Time) {
	t.Helper()
	tk, ok, wake, err := s.Peek(context.Background(), now)
	must(t, err)
	return tk, ok, wake
}

func get(t *testing.T, s tasks.Store, ticket string) api.Task {
	t.Helper()
	tk, _, err := s.Get(context.Background(), ticket)
	must(t, err)
	return tk
}

func counts(t *testing.T, s tasks.Store) api.TaskCounts {
	t.Helper()
	c, err := s.Counts(context.Background())
	must(t, err)
	return c
}

func lease(t *testing.T, s tasks.Store, ticket string, now time.Time) api.Task {
	t.Helper()
	tk, err := s.Lease(context.Background(), ticket, now)
	must(t, err)
	return tk
}

func testDuplicateEnqueue(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	enqueue(t, s, a)
	b := a
	b.Tool, b.Payload = "other", json.RawMessage(`"other"`)
	enqueue(t, s, b) // the same ticket again: a no-op
	list, err := s.List(context.Background())
	must(t, err)
	if len(list) != 1 || list[0].Tool != a.Tool || string(get(t, s, a.Ticket).Payload) != string(a.Payload) {
		t.Fatalf("after a duplicate enqueue: %+v, want the first task alone", list)
	}
	if len(list[0].Payload) != 0 {
		t.Fatalf("List carries payloads: %s", list[0].Payload)
	}
	if c := counts(t, s); c.Queued != 1 {
		t.Fatalf("counts %+v, want 1 queued", c)
	}
}

func testOldestFirst(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	var want []string
	for i := range 5 {
		tk := task(i, now.Add(time.Duration(i)*time.Millisecond))
		enqueue(t, s, tk)
		want = append(want, tk.Ticket)
	}
	list, err := s.List(context.Background())
	must(t, err)
	for i, tk := range list {
		if tk.Ticket != want[i] || tk.State != api.TaskQueued {
			t.Fatalf("list[%d] = %s %s, want %s queued", i, tk.Ticket, tk.State, want[i])
		}
	}
	at := now.Add(time.Second)
	for i, w := range want {
		got, ok, _ := peek(t, s, at)
		if !ok || got.Ticket != w {
			t.Fatalf("peek %d = %s (%v), want %s", i, got.Ticket, ok, w)
		}
		l := lease(t, s, got.Ticket, at)
		if l.Tool != fmt.Sprintf("tool%d", i) || l.Bytes != uint64(1<<20+i) || string(l.Payload) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("leased %+v: fields lost", l)
		}
	}
	if _, ok, _ := peek(t, s, at); ok {
		t.Fatal("peek found a task with every one leased")
	}
}

func testLeaseIsExclusive(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	enqueue(t, s, a)
	lease(t, s, a.Ticket, now)
	if _, err := s.Lease(context.Background(), a.Ticket, now); !errors.Is(err, tasks.ErrNotQueued) {
		t.Fatalf("second lease: %v, want ErrNotQueued", err)
	}
	if _, err := s.Lease(context.Background(), "t-none", now); !errors.Is(err, tasks.ErrNotQueued) {
		t.Fatalf("lease of an unknown ticket: %v, want ErrNotQueued", err)
	}
	if c := counts(t, s); c.Running != 1 || c.Queued != 0 {
		t.Fatalf("counts %+v, want 1 running", c)
	}
}

func testLeaseExpiry(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	vis := time.Minute
	a, b := task(1, now), task(2, now.Add(time.Millisecond))
	enqueue(t, s, a, b)
	lease(t, s, a.Ticket, now)
	// Not yet idle for vis: nothing expires.
	got, err := s.Expire(ctx, now.Add(vis/2), vis, 5)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("expired before the visibility timeout: %+v", got)
	}
	got, err = s.Expire(ctx, now.Add(vis+time.Second), vis, 5)
	must(t, err)
	if len(got) != 1 || got[0].Ticket != a.Ticket || got[0].State != api.TaskQueued || got[0].Attempts != 1 || got[0].LastError == "" {
		t.Fatalf("expired %+v, want %s queued with 1 attempt and a reason", got, a.Ticket)
	}
	// Back in the queue, still ahead of the younger task.
	if p, ok, _ := peek(t, s, now.Add(vis+2*time.Second)); !ok || p.Ticket != a.Ticket {
		t.Fatalf("peek after expiry = %s, want %s (oldest first)", p.Ticket, a.Ticket)
	}
}

func testExtend(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	vis := time.Minute
	a := task(1, now)
	enqueue(t, s, a)
	lease(t, s, a.Ticket, now)
	must(t, s.Extend(ctx, a.Ticket, now.Add(40*time.Second)))
	got, err := s.Expire(ctx, now.Add(vis+time.Second), vis, 5)
	must(t, err)
	if len(got) != 0 {
		t.Fatalf("an extended lease expired: %+v", got)
	}
	if st := get(t, s, a.Ticket).State; st != api.TaskRunning {
		t.Fatalf("state %s after extend, want running", st)
	}
	if err := s.Extend(ctx, "t-none", now); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("extend of an unknown task: %v, want ErrNotRunning", err)
	}
}

func testAck(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a := task(1, now)
	enqueue(t, s, a)
	if err := s.Ack(ctx, a.Ticket, nil, now); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("ack of a queued task: %v, want ErrNotRunning", err)
	}
	lease(t, s, a.Ticket, now)
	must(t, s.Ack(ctx, a.Ticket, []byte("result"), now.Add(time.Second)))
	tk, res, err := s.Get(ctx, a.Ticket)
	must(t, err)
	if tk.State != api.TaskDone || string(res) != "result" || !tk.Finished.Equal(now.Add(time.Second)) {
		t.Fatalf("after ack: %+v %q, want done with its result", tk, res)
	}
	if err := s.Ack(ctx, a.Ticket, nil, now); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("second ack: %v, want ErrNotRunning", err)
	}
	if _, err := s.Fail(ctx, a.Ticket, "x", now, 5); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("fail after ack: %v, want ErrNotRunning", err)
	}
	// A done task is never delivered again, even after the timeout.
	if exp, _ := s.Expire(ctx, now.Add(time.Hour), time.Minute, 5); len(exp) != 0 {
		t.Fatalf("a done task expired: %+v", exp)
	}
	if _, ok, _ := peek(t, s, now.Add(time.Hour)); ok {
		t.Fatal("a done task is queued")
	}
	if c := counts(t, s); c.Done != 1 || c.Pending() != 0 {
		t.Fatalf("counts %+v, want 1 done", c)
	}
}

// testAckLease: the done of one task and the lease of the next in one
// call are each as Ack and Lease alone, the next is leased only if it is
// the oldest due (as Peek answers), and both survive a restart.
func testAckLease(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a, b, c, d := task(1, now), task(2, now.Add(time.Millisecond)), task(3, now.Add(2*time.Millisecond)), task(4, now.Add(3*time.Millisecond))
	enqueue(t, s, a, b, c, d)
	lease(t, s, a.Ticket, now)
	later := now.Add(time.Second)
	got, leased, after, err := s.AckLease(ctx, a.Ticket, []byte("ra"), b.Ticket, later)
	must(t, err)
	if !leased || got.Ticket != b.Ticket || got.State != api.TaskRunning || string(got.Payload) != `{"n":2}` || got.Bytes != b.Bytes || got.Tool != b.Tool {
		t.Fatalf("ack of a and lease of b: %+v leased %v, want b running with its payload", got, leased)
	}
	if after.Ticket != "" && (after.Ticket != c.Ticket || after.Bytes != c.Bytes || after.Tool != c.Tool || after.Priority != c.Priority) {
		t.Fatalf("after b: %+v, want c (or nothing told)", after)
	}
	if tk, res, err := s.Get(ctx, a.Ticket); err != nil || tk.State != api.TaskDone || string(res) != "ra" || !tk.Finished.Equal(later) {
		t.Fatalf("a after AckLease: %+v %q %v, want done at %v with its result", tk, res, err, later)
	}
	// b's lease is a lease: its visibility timeout runs from later.
	if exp, _ := s.Expire(ctx, later.Add(30*time.Second), time.Minute, 5); len(exp) != 0 {
		t.Fatalf("b expired before its timeout: %+v", exp)
	}
	if _, err := s.Lease(ctx, b.Ticket, later); !errors.Is(err, tasks.ErrNotQueued) {
		t.Fatalf("b leased twice: %v, want ErrNotQueued", err)
	}
	// No lease without the ack: a is done already.
	if got, leased, _, err := s.AckLease(ctx, a.Ticket, nil, c.Ticket, later); !errors.Is(err, tasks.ErrNotRunning) || leased {
		t.Fatalf("ack of a done task, lease of c: %+v leased %v, %v; want ErrNotRunning and no lease", got, leased, err)
	}
	if tk := get(t, s, c.Ticket); tk.State != api.TaskQueued {
		t.Fatalf("c after a failed ack: %+v, want queued", tk)
	}
	// Oldest first: d is not leased while c waits; the ack is made.
	if got, leased, _, err := s.AckLease(ctx, b.Ticket, nil, d.Ticket, later); err != nil || leased {
		t.Fatalf("AckLease(b, d) with c older: %+v leased %v, %v; want the ack, no lease", got, leased, err)
	}
	if tk := get(t, s, d.Ticket); tk.State != api.TaskQueued {
		t.Fatalf("d leased before c: %+v", tk)
	}
	// A next that is not queued (unknown, running, done) is not leased.
	lease(t, s, c.Ticket, later)
	if got, leased, _, err := s.AckLease(ctx, c.Ticket, nil, "t-unknown", later); err != nil || leased {
		t.Fatalf("AckLease(c, unknown): %+v leased %v, %v; want the ack, no lease", got, leased, err)
	}
	// Nor one backing off: d fails, due in an hour.
	lease(t, s, d.Ticket, later)
	if _, err := s.Fail(ctx, d.Ticket, "x", later.Add(time.Hour), 5); err != nil {
		t.Fatal(err)
	}
	e := task(5, now.Add(4*time.Millisecond))
	enqueue(t, s, e)
	lease(t, s, e.Ticket, later)
	if got, leased, _, err := s.AckLease(ctx, e.Ticket, nil, d.Ticket, later); err != nil || leased {
		t.Fatalf("AckLease of a task backing off: %+v leased %v, %v; want the ack, no lease", got, leased, err)
	}
	if c := counts(t, s); c.Done != 4 || c.Queued != 1 || c.Running != 0 {
		t.Fatalf("counts %+v, want 4 done, 1 queued", c)
	}
	// Once due, d is the oldest again; nothing is due after g.
	g := task(7, now.Add(6*time.Millisecond))
	enqueue(t, s, g)
	lease(t, s, d.Ticket, later.Add(time.Hour))
	got, leased, after, err = s.AckLease(ctx, d.Ticket, []byte("rd"), g.Ticket, later.Add(time.Hour))
	if err != nil || !leased || got.Ticket != g.Ticket || after.Ticket != "" {
		t.Fatalf("AckLease(d, g): %+v leased %v after %+v, %v; want g, nothing after", got, leased, after, err)
	}
	// Both halves are durable.
	must(t, s.Close())
	s = open(t)
	if tk, res, err := s.Get(ctx, d.Ticket); err != nil || tk.State != api.TaskDone || string(res) != "rd" {
		t.Fatalf("d after reopening: %+v %q %v, want done", tk, res, err)
	}
	if tk := get(t, s, g.Ticket); tk.State != api.TaskRunning {
		t.Fatalf("g after reopening: %+v, want running", tk)
	}
}

func testFailAndBackoff(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a := task(1, now)
	enqueue(t, s, a)
	lease(t, s, a.Ticket, now)
	retry := now.Add(tasks.Backoff(1))
	tk, err := s.Fail(ctx, a.Ticket, "boom", retry, 5)
	must(t, err)
	if tk.State != api.TaskQueued || tk.Attempts != 1 || tk.LastError != "boom" {
		t.Fatalf("after fail: %+v, want queued, 1 attempt, boom", tk)
	}
	if _, ok, wake := peek(t, s, now.Add(500*time.Millisecond)); ok || !wake.Equal(retry) {
		t.Fatalf("during the backoff: ok %v wake %v, want none due until %v", ok, wake, retry)
	}
	if _, err := s.Lease(ctx, a.Ticket, now.Add(500*time.Millisecond)); !errors.Is(err, tasks.ErrNotQueued) {
		t.Fatalf("lease during the backoff: %v, want ErrNotQueued", err)
	}
	if p, ok, _ := peek(t, s, retry); !ok || p.Ticket != a.Ticket {
		t.Fatalf("at the retry time: %v %s, want %s due", ok, p.Ticket, a.Ticket)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		if got := tasks.Backoff(i + 1); got != want {
			t.Fatalf("Backoff(%d) = %v, want %v", i+1, got, want)
		}
	}
	if got := tasks.Backoff(30); got != tasks.MaxBackoff {
		t.Fatalf("Backoff(30) = %v, want %v", got, tasks.MaxBackoff)
	}
}

func testMaxAttemptsAndDead(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a := task(1, now)
	enqueue(t, s, a)
	const max = 3
	for i := 1; i <= max; i++ {
		lease(t, s, a.Ticket, now)
		tk, err := s.Fail(ctx, a.Ticket, fmt.Sprintf("fail %d", i), now, max)
		must(t, err)
		want := api.TaskQueued
		if i == max {
			want = api.TaskDead
		}
		if tk.State != want || tk.Attempts != i {
			t.Fatalf("failure %d: %s with %d attempts, want %s with %d", i, tk.State, tk.Attempts, want, i)
		}
	}
	if _, ok, _ := peek(t, s, now.Add(time.Hour)); ok {
		t.Fatal("a dead task is due")
	}
	if c := counts(t, s); c.Dead != 1 || c.Pending() != 0 {
		t.Fatalf("counts %+v, want 1 dead", c)
	}
	// Expiry counts too: one more task dies of timeouts alone.
	b := task(2, now)
	enqueue(t, s, b)
	for i := 1; i <= max; i++ {
		lease(t, s, b.Ticket, now.Add(time.Duration(i)*time.Hour))
		exp, err := s.Expire(ctx, now.Add(time.Duration(i)*time.Hour+2*time.Minute), time.Minute, max)
		must(t, err)
		if len(exp) != 1 || exp[0].Attempts != i {
			t.Fatalf("expiry %d: %+v", i, exp)
		}
	}
	if st := get(t, s, b.Ticket).State; st != api.TaskDead {
		t.Fatalf("after %d expiries: %s, want dead", max, st)
	}
	// Retry: back, attempts reset; only dead tasks.
	must(t, s.Retry(ctx, a.Ticket, now))
	if tk := get(t, s, a.Ticket); tk.State != api.TaskQueued || tk.Attempts != 0 {
		t.Fatalf("after retry: %+v, want queued with 0 attempts", tk)
	}
	if err := s.Retry(ctx, a.Ticket, now); !errors.Is(err, tasks.ErrNotDead) {
		t.Fatalf("retry of a queued task: %v, want ErrNotDead", err)
	}
	if err := s.Retry(ctx, "t-none", now); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("retry of an unknown task: %v, want ErrUnknown", err)
	}
	if p, ok, _ := peek(t, s, now.Add(time.Second)); !ok || p.Ticket != a.Ticket {
		t.Fatalf("a retried task is not due: %v %s", ok, p.Ticket)
	}
}

func testKeepResults(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a, b, c := task(1, now), task(2, now), task(3, now)
	enqueue(t, s, a, b, c)
	lease(t, s, a.Ticket, now)
	must(t, s.Ack(ctx, a.Ticket, []byte("old"), now))
	lease(t, s, b.Ticket, now)
	must(t, s.Ack(ctx, b.Ticket, []byte("new"), now.Add(time.Hour)))
	n, err := s.Purge(ctx, now.Add(time.Minute))
	must(t, err)
	if n != 1 {
		t.Fatalf("purged %d, want 1", n)
	}
	if _, _, err := s.Get(ctx, a.Ticket); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("an expired result: %v, want ErrUnknown", err)
	}
	if _, res, err := s.Get(ctx, b.Ticket); err != nil || string(res) != "new" {
		t.Fatalf("a kept result: %q %v", res, err)
	}
	if st := get(t, s, c.Ticket).State; st != api.TaskQueued {
		t.Fatalf("purge touched a queued task: %s", st)
	}
}

func testMaxTasks(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a, b, c := task(1, now), task(2, now), task(3, now)
	must(t, s.Enqueue(ctx, a, 2))
	must(t, s.Enqueue(ctx, b, 2))
	if err := s.Enqueue(ctx, c, 2); !errors.Is(err, tasks.ErrFull) {
		t.Fatalf("third task with max_tasks 2: %v, want ErrFull", err)
	}
	if _, _, err := s.Get(ctx, c.Ticket); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("a refused task was stored: %v", err)
	}
	lease(t, s, a.Ticket, now) // running counts too
	if err := s.Enqueue(ctx, c, 2); !errors.Is(err, tasks.ErrFull) {
		t.Fatalf("with one running and one queued: %v, want ErrFull", err)
	}
	must(t, s.Ack(ctx, a.Ticket, nil, now)) // done does not count
	must(t, s.Enqueue(ctx, c, 2))
}

func testDrop(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a, b := task(1, now), task(2, now)
	enqueue(t, s, a, b)
	lease(t, s, b.Ticket, now)
	for _, tk := range []api.Task{a, b} {
		got, err := s.Drop(ctx, tk.Ticket)
		must(t, err)
		if got.Tool != tk.Tool {
			t.Fatalf("dropped %+v, want %s", got, tk.Tool)
		}
		if _, _, err := s.Get(ctx, tk.Ticket); !errors.Is(err, tasks.ErrUnknown) {
			t.Fatalf("after drop: %v, want ErrUnknown", err)
		}
	}
	if _, err := s.Drop(ctx, a.Ticket); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("second drop: %v, want ErrUnknown", err)
	}
	if _, ok, _ := peek(t, s, now.Add(time.Hour)); ok {
		t.Fatal("a dropped task is due")
	}
	if exp, _ := s.Expire(ctx, now.Add(time.Hour), time.Minute, 5); len(exp) != 0 {
		t.Fatalf("a dropped running task expired: %+v", exp)
	}
	if c := counts(t, s); c != (api.TaskCounts{}) {
		t.Fatalf("counts %+v after dropping all", c)
	}
}

func testRecover(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a, b := task(1, now), task(2, now)
	enqueue(t, s, a, b)
	lease(t, s, a.Ticket, now)
	must(t, s.Close())
	s = open(t) // the holder died and came back
	got, err := s.Recover(context.Background(), now.Add(time.Second), 5)
	must(t, err)
	if len(got) != 1 || got[0].Ticket != a.Ticket || got[0].State != api.TaskQueued || got[0].Attempts != 1 {
		t.Fatalf("recovered %+v, want %s queued with 1 attempt", got, a.Ticket)
	}
	if p, ok, _ := peek(t, s, now.Add(time.Second)); !ok || p.Ticket != a.Ticket {
		t.Fatalf("after recovery the oldest is %s, want %s", p.Ticket, a.Ticket)
	}
}

func testDurable(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := clock()
	a, b := task(1, now), task(2, now)
	enqueue(t, s, a, b)
	lease(t, s, a.Ticket, now)
	must(t, s.Ack(ctx, a.Ticket, []byte("r"), now))
	must(t, s.Close())
	s = open(t)
	list, err := s.List(ctx)
	must(t, err)
	if len(list) != 2 || list[0].State != api.TaskDone || list[1].State != api.TaskQueued || list[1].Tool != b.Tool {
		t.Fatalf("after reopening: %+v", list)
	}
	if got := get(t, s, b.Ticket); string(got.Payload) != `{"n":2}` || got.Bytes != b.Bytes {
		t.Fatalf("after reopening: %+v, payload lost", got)
	}
}
