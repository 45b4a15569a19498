package taskstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/tasks"
)

// bodyCases are the conformance cases of tasks' bodies (Run runs them).
var bodyCases = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"BodyRoundTrip", testBodyRoundTrip},
	{"BodyEmpty", testBodyEmpty},
	{"BodyReadError", testBodyReadError},
	{"BodyDuplicate", testBodyDuplicate},
	{"BodyFull", testBodyFull},
	{"AckBodyNotRunning", testAckBodyNotRunning},
	{"BodyKeptForRetry", testBodyKeptForRetry},
	{"BodyDropAndPurge", testBodyDropAndPurge},
	{"BodyDurable", testBodyDurable},
}

// pattern is n bytes that differ from chunk to chunk and from seed to
// seed, so that a chunk out of place or another body's shows.
func pattern(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i/tasks.ChunkSize)*7 + byte(i%251)
	}
	return b
}

// bodyOf picks one of a store's body openers.
type bodyOf func(tasks.Store) func(context.Context, string) (io.ReadCloser, int64, error)

func requestBody(s tasks.Store) func(context.Context, string) (io.ReadCloser, int64, error) {
	return s.RequestBody
}
func resultBody(s tasks.Store) func(context.Context, string) (io.ReadCloser, int64, error) {
	return s.ResultBody
}

// readBody reads one of ticket's bodies whole, checking its length.
func readBody(t *testing.T, s tasks.Store, ticket string, which bodyOf) []byte {
	t.Helper()
	r, size, err := which(s)(context.Background(), ticket)
	must(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	must(t, err)
	if int64(len(b)) != size {
		t.Fatalf("a body of %s: %d bytes, its length said %d", ticket, len(b), size)
	}
	return b
}

func enqueueBody(t *testing.T, s tasks.Store, tk api.Task, body []byte) {
	t.Helper()
	must(t, s.EnqueueBody(context.Background(), tk, bytes.NewReader(body), 1000))
}

func testBodyRoundTrip(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	body := pattern(1, 2*tasks.ChunkSize+tasks.ChunkSize/2)
	enqueueBody(t, s, a, body)
	if got := readBody(t, s, a.Ticket, requestBody); !bytes.Equal(got, body) {
		t.Fatalf("the request body read back differs (%d bytes, want %d)", len(got), len(body))
	}
	if g := get(t, s, a.Ticket); string(g.Payload) != string(a.Payload) || g.State != api.TaskQueued {
		t.Fatalf("the task with a body: %+v", g)
	}
	if got := readBody(t, s, a.Ticket, resultBody); len(got) != 0 {
		t.Fatalf("a queued task's result body: %d bytes", len(got))
	}
	lease(t, s, a.Ticket, now)
	result := pattern(9, tasks.ChunkSize+1)
	must(t, s.AckBody(context.Background(), a.Ticket, []byte(`{"status":200}`), bytes.NewReader(result), now))
	if got := readBody(t, s, a.Ticket, resultBody); !bytes.Equal(got, result) {
		t.Fatalf("the result body read back differs (%d bytes, want %d)", len(got), len(result))
	}
	if got := readBody(t, s, a.Ticket, requestBody); len(got) != 0 {
		t.Fatalf("a done task keeps its request body (%d bytes)", len(got))
	}
	g, res, err := s.Get(context.Background(), a.Ticket)
	must(t, err)
	if g.State != api.TaskDone || string(res) != `{"status":200}` {
		t.Fatalf("after AckBody: %+v, result %s", g, res)
	}
	if _, _, err := s.RequestBody(context.Background(), "t-unknown"); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("the body of an unknown ticket: %v, want ErrUnknown", err)
	}
}

func testBodyEmpty(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	enqueueBody(t, s, a, nil)
	if got := readBody(t, s, a.Ticket, requestBody); len(got) != 0 {
		t.Fatalf("an empty body read back as %d bytes", len(got))
	}
	lease(t, s, a.Ticket, now)
	must(t, s.AckBody(context.Background(), a.Ticket, []byte(`{}`), bytes.NewReader(nil), now))
	if get(t, s, a.Ticket).State != api.TaskDone {
		t.Fatal("AckBody with an empty body did not finish the task")
	}
}

// failingReader gives n bytes, then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	r.n -= k
	return k, nil
}

var errClientLeft = errors.New("the client left")

func testBodyReadError(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	err := s.EnqueueBody(context.Background(), a, &failingReader{n: tasks.ChunkSize + 10, err: errClientLeft}, 1000)
	if !errors.Is(err, tasks.ErrBody) || !errors.Is(err, errClientLeft) {
		t.Fatalf("a body that failed: %v, want ErrBody wrapping the reader's error", err)
	}
	if _, _, err := s.Get(context.Background(), a.Ticket); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("a task whose body failed was stored: %v", err)
	}
	if c := counts(t, s); c != (api.TaskCounts{}) {
		t.Fatalf("counts %+v, want none", c)
	}
	enqueueBody(t, s, a, []byte("x"))
	lease(t, s, a.Ticket, now)
	err = s.AckBody(context.Background(), a.Ticket, nil, &failingReader{n: 3, err: errClientLeft}, now)
	if !errors.Is(err, tasks.ErrBody) || get(t, s, a.Ticket).State != api.TaskRunning {
		t.Fatalf("a result body that failed: %v, state %s; want ErrBody, still running", err, get(t, s, a.Ticket).State)
	}
}

func testBodyDuplicate(t *testing.T, open Opener) {
	s := open(t)
	a := task(1, clock())
	first := pattern(1, tasks.ChunkSize+5)
	enqueueBody(t, s, a, first)
	enqueueBody(t, s, a, pattern(2, 3*tasks.ChunkSize)) // the same ticket: a no-op
	if got := readBody(t, s, a.Ticket, requestBody); !bytes.Equal(got, first) {
		t.Fatalf("a duplicate enqueue changed the body (%d bytes)", len(got))
	}
}

func testBodyFull(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	enqueueBody(t, s, task(1, now), []byte("x"))
	b := task(2, now)
	if err := s.EnqueueBody(context.Background(), b, bytes.NewReader(pattern(1, tasks.ChunkSize)), 1); !errors.Is(err, tasks.ErrFull) {
		t.Fatalf("past max_tasks: %v, want ErrFull", err)
	}
	if _, _, err := s.Get(context.Background(), b.Ticket); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("past max_tasks a task was stored: %v", err)
	}
}

func testAckBodyNotRunning(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	body := pattern(3, 100)
	enqueueBody(t, s, a, body)
	err := s.AckBody(context.Background(), a.Ticket, []byte(`{}`), bytes.NewReader(pattern(4, tasks.ChunkSize)), now)
	if !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("AckBody of a queued task: %v, want ErrNotRunning", err)
	}
	if got := readBody(t, s, a.Ticket, requestBody); !bytes.Equal(got, body) || get(t, s, a.Ticket).State != api.TaskQueued {
		t.Fatal("a refused AckBody changed the task")
	}
	if got := readBody(t, s, a.Ticket, resultBody); len(got) != 0 {
		t.Fatalf("a refused AckBody kept a result body of %d bytes", len(got))
	}
}

// testBodyKeptForRetry: a failed attempt and a dead task keep the request
// body, to be run again.
func testBodyKeptForRetry(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a := task(1, now)
	body := pattern(5, tasks.ChunkSize+7)
	enqueueBody(t, s, a, body)
	lease(t, s, a.Ticket, now)
	_, err := s.Fail(context.Background(), a.Ticket, "boom", now, 1)
	must(t, err)
	if get(t, s, a.Ticket).State != api.TaskDead {
		t.Fatal("not dead after max_attempts")
	}
	must(t, s.Retry(context.Background(), a.Ticket, now))
	if got := readBody(t, s, a.Ticket, requestBody); !bytes.Equal(got, body) {
		t.Fatalf("the body after a death and a retry: %d bytes, want %d", len(got), len(body))
	}
}

func testBodyDropAndPurge(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a, b := task(1, now), task(2, now.Add(time.Millisecond))
	enqueueBody(t, s, a, pattern(1, tasks.ChunkSize+1))
	enqueueBody(t, s, b, pattern(2, 10))
	_, err := s.Drop(context.Background(), a.Ticket)
	must(t, err)
	if _, _, err := s.RequestBody(context.Background(), a.Ticket); !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("the body of a dropped task: %v, want ErrUnknown", err)
	}
	lease(t, s, b.Ticket, now)
	must(t, s.AckBody(context.Background(), b.Ticket, []byte(`{}`), bytes.NewReader(pattern(3, tasks.ChunkSize+2)), now))
	n, err := s.Purge(context.Background(), now.Add(time.Hour))
	must(t, err)
	if _, _, err := s.ResultBody(context.Background(), b.Ticket); n != 1 || !errors.Is(err, tasks.ErrUnknown) {
		t.Fatalf("purged %d; the result body of a purged task: %v, want ErrUnknown", n, err)
	}
}

func testBodyDurable(t *testing.T, open Opener) {
	s := open(t)
	now := clock()
	a, b := task(1, now), task(2, now.Add(time.Millisecond))
	body, result := pattern(6, 2*tasks.ChunkSize), pattern(7, 3)
	enqueueBody(t, s, a, body)
	enqueueBody(t, s, b, []byte("b"))
	lease(t, s, b.Ticket, now)
	must(t, s.AckBody(context.Background(), b.Ticket, []byte(`{}`), bytes.NewReader(result), now))
	must(t, s.Close())
	s = open(t)
	if got := readBody(t, s, a.Ticket, requestBody); !bytes.Equal(got, body) {
		t.Fatalf("after a restart the request body is %d bytes, want %d", len(got), len(body))
	}
	if got := readBody(t, s, b.Ticket, resultBody); !bytes.Equal(got, result) {
		t.Fatalf("after a restart the result body is %q, want %q", got, result)
	}
}

// StreamsBodies checks that s writes a body as it reads it and reads it
// back as it is read, never holding it whole: a body of 64 MiB moves
// through it, each way, with the live heap (after a collection at every
// fourth chunk) never 16 MiB above where it began. memstore, which holds
// everything in memory, does not pass it; a durable store must.
func StreamsBodies(t *testing.T, s tasks.Store) {
	const size, slack = 64 << 20, 16 << 20
	base := liveHeap()
	peak := base
	src := &watchedReader{left: size, every: 4 * tasks.ChunkSize, watch: func() { peak = max(peak, liveHeap()) }}
	now := clock()
	a := task(1, now)
	h := sha256.New()
	must(t, s.EnqueueBody(context.Background(), a, io.TeeReader(src, h), 1000))
	want := h.Sum(nil)
	if peak > base+slack {
		t.Errorf("writing a %d MiB body, the live heap grew by %d MiB", size>>20, (peak-base)>>20)
	}
	r, n, err := s.RequestBody(context.Background(), a.Ticket)
	must(t, err)
	defer r.Close()
	h.Reset()
	base, peak = liveHeap(), 0
	got, err := io.Copy(&watchedWriter{w: h, every: 4 * tasks.ChunkSize, watch: func() { peak = max(peak, liveHeap()) }}, r)
	must(t, err)
	if n != size || got != size || !bytes.Equal(h.Sum(nil), want) {
		t.Fatalf("read back %d bytes (length %d) of %d, or other bytes", got, n, size)
	}
	if peak > base+slack {
		t.Errorf("reading a %d MiB body back, the live heap grew by %d MiB", size>>20, (peak-base)>>20)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// watchedReader gives left bytes of a pattern, calling watch every every
// bytes.
type watchedReader struct {
	left, every, since int
	watch              func()
}

func (r *watchedReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	for i := range p[:n] {
		p[i] = byte(r.left - i)
	}
	r.left -= n
	if r.since += n; r.since >= r.every {
		r.since = 0
		r.watch()
	}
	return n, nil
}

type watchedWriter struct {
	w            io.Writer
	every, since int
	watch        func()
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	if w.since += len(p); w.since >= w.every {
		w.since = 0
		w.watch()
	}
	return w.w.Write(p)
}

// LeavesNoBodies checks that what a store keeps of a body goes with it:
// left counts what it keeps of bodies (SQLite's chunk rows, Redis' keys).
// A body that failed midway, or that was refused (a duplicate ticket, a
// full queue, an AckBody of a task not running), leaves nothing; once a
// task is done its request body goes, and the bodies of a purged and of a
// dropped task go.
func LeavesNoBodies(t *testing.T, s tasks.Store, left func() int) {
	t.Helper()
	ctx := context.Background()
	now := clock()
	zeros := func(n int) io.Reader { return bytes.NewReader(make([]byte, n)) }
	tk := func(i int) api.Task { return task(i, now) }
	if err := s.EnqueueBody(ctx, tk(1), zeros(3*tasks.ChunkSize), 10); err != nil {
		t.Fatal(err)
	}
	stored := left()
	if stored == 0 {
		t.Fatal("a stored body left nothing to count: left counts the wrong thing")
	}
	if err := s.EnqueueBody(ctx, tk(2), io.MultiReader(zeros(tasks.ChunkSize+1), &failingReader{err: errClientLeft}), 10); !errors.Is(err, tasks.ErrBody) {
		t.Fatalf("a body that failed: %v", err)
	}
	if err := s.EnqueueBody(ctx, tk(1), zeros(2*tasks.ChunkSize), 10); err != nil {
		t.Fatalf("a duplicate: %v", err)
	}
	if err := s.EnqueueBody(ctx, tk(3), zeros(2*tasks.ChunkSize), 1); !errors.Is(err, tasks.ErrFull) {
		t.Fatalf("past max_tasks: %v", err)
	}
	if err := s.AckBody(ctx, tk(1).Ticket, nil, zeros(tasks.ChunkSize), now); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatalf("AckBody of a queued task: %v", err)
	}
	if n := left(); n != stored {
		t.Fatalf("%d left after the refused bodies, want the stored one's %d", n, stored)
	}
	lease(t, s, tk(1).Ticket, now)
	must(t, s.AckBody(ctx, tk(1).Ticket, nil, zeros(tasks.ChunkSize), now))
	if n := left(); n == 0 || n >= stored+1 {
		t.Fatalf("%d left once done, want the result's alone (the request's %d gone)", n, stored)
	}
	if _, err := s.Purge(ctx, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	must(t, s.EnqueueBody(ctx, tk(4), zeros(tasks.ChunkSize), 10))
	_, err := s.Drop(ctx, tk(4).Ticket)
	must(t, err)
	if n := left(); n != 0 {
		t.Fatalf("%d left after a purge and a drop", n)
	}
}
