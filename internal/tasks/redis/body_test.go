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

func TestBodiesLeaveNoKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	taskstest.LeavesNoBodies(t, open(t, srv.URL(), "b", "host-a"), func() int { return len(bodyKeys(t, c, "b")) })
}

// TestBodiesExpireUntilStored: a stored body persists (no TTL); one being
// written (its host could die mid-write) expires within the hour unless
// its task is stored.
func TestBodiesExpireUntilStored(t *testing.T) {
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
	cut := &stopReader{r: body(2 * tasks.ChunkSize), at: tasks.ChunkSize + 1, reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.EnqueueBody(ctx, task("t-5"), cut, 10) }()
	<-cut.reached // its first chunk is written: the store reads the next
	got := bodyKeys(t, c, "b")
	close(cut.release)
	if err := <-done; err == nil {
		t.Error("a body cut off was stored")
	}
	if len(got) != len(keys)+1 {
		t.Fatalf("body keys while one is written: %v", got)
	}
	for k, ttl := range got {
		if _, stored := keys[k]; !stored && (ttl <= 0 || ttl > time.Hour) {
			t.Errorf("a body being written, %s, expires in %v, want within an hour", k, ttl)
		}
	}
}

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
