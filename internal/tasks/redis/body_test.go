package redis_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/redistest"
	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/taskstest"
)

func TestStreamsBodies(t *testing.T) {
	srv := redistest.Start(t)
	taskstest.StreamsBodies(t, open(t, srv.URL(), "big", "host-a"))
}

// bodyKeys are the keys of the bodies of name's tasks, with their TTLs.
func bodyKeys(t *testing.T, c *goredis.Client, name string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	keys, err := c.Keys(ctx, "gpuguard:tasks:"+name+":body:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, k := range keys {
		out[k] = c.PTTL(ctx, k).Val()
	}
	return out
}

// TestBodiesLeaveNoKeys: a body that failed, one refused (full queue,
// duplicate ticket, a task not running) and the bodies of a dropped and
// a purged task leave no key behind; a stored body persists (no TTL),
// and one being written expires unless its task is stored.
func TestBodiesLeaveNoKeys(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL(), "b", "host-a")
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	ctx := context.Background()
	now := time.Now()
	body := func(n int) io.Reader { return bytes.NewReader(make([]byte, n)) }
	task := func(ticket string) api.Task {
		return api.Task{Ticket: ticket, Tool: "http", Priority: "P2", Enqueued: now}
	}
	if err := s.EnqueueBody(ctx, task("t-1"), body(3*tasks.ChunkSize), 10); err != nil {
		t.Fatal(err)
	}
	keys := bodyKeys(t, c, "b")
	for k, ttl := range keys {
		if ttl != -1 {
			t.Errorf("the stored body %s expires in %v", k, ttl)
		}
	}
	if len(keys) != 1 {
		t.Fatalf("body keys %v, want one", keys)
	}
	failing := io.MultiReader(body(tasks.ChunkSize+1), errReader{})
	if err := s.EnqueueBody(ctx, task("t-2"), failing, 10); !errors.Is(err, tasks.ErrBody) {
		t.Fatal(err)
	}
	if err := s.EnqueueBody(ctx, task("t-1"), body(2*tasks.ChunkSize), 10); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueBody(ctx, task("t-3"), body(2*tasks.ChunkSize), 1); !errors.Is(err, tasks.ErrFull) {
		t.Fatal(err)
	}
	if err := s.AckBody(ctx, "t-1", nil, body(tasks.ChunkSize), now); !errors.Is(err, tasks.ErrNotRunning) {
		t.Fatal(err)
	}
	if got := bodyKeys(t, c, "b"); len(got) != 1 {
		t.Fatalf("body keys after the refused bodies: %v, want t-1's", got)
	}
	if _, err := s.Lease(ctx, "t-1", now); err != nil {
		t.Fatal(err)
	}
	if err := s.AckBody(ctx, "t-1", nil, body(2*tasks.ChunkSize), now); err != nil {
		t.Fatal(err)
	}
	if got := bodyKeys(t, c, "b"); len(got) != 1 || maps1(got) == maps1(keys) {
		t.Fatalf("body keys once done: %v, want the result's alone", got)
	}
	if _, err := s.Purge(ctx, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.EnqueueBody(ctx, task("t-4"), body(tasks.ChunkSize), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Drop(ctx, "t-4"); err != nil {
		t.Fatal(err)
	}
	if got := bodyKeys(t, c, "b"); len(got) != 0 {
		t.Fatalf("body keys after a purge and a drop: %v", got)
	}
	// A body cut off mid-write (its host died) expires.
	cut := &stopReader{r: body(2 * tasks.ChunkSize), at: tasks.ChunkSize + 1, reached: make(chan struct{}), release: make(chan struct{})}
	go func() { _ = s.EnqueueBody(ctx, task("t-5"), cut, 10) }()
	<-cut.reached // its first chunk is written: the store reads the next
	got := bodyKeys(t, c, "b")
	for k, ttl := range got {
		if ttl <= 0 || ttl > time.Hour {
			t.Errorf("a body being written, %s, expires in %v, want within an hour", k, ttl)
		}
	}
	if len(got) != 1 {
		t.Errorf("body keys while one is written: %v", got)
	}
	close(cut.release)
}

func maps1(m map[string]time.Duration) string {
	for k := range m {
		return k
	}
	return ""
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("reset by peer") }

// stopReader reads r up to at bytes, says so, and waits for release.
type stopReader struct {
	r       io.Reader
	at, n   int
	reached chan struct{}
	release chan struct{}
	once    bool
}

func (s *stopReader) Read(p []byte) (int, error) {
	if s.n >= s.at {
		if !s.once {
			s.once = true
			close(s.reached)
		}
		<-s.release
		return 0, errors.New("the client left")
	}
	k, err := s.r.Read(p[:min(len(p), s.at-s.n)])
	s.n += k
	return k, err
}
