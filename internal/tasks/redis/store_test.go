package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/redistest"
	"github.com/gpuguard/gpuguard/internal/tasks"
	"github.com/gpuguard/gpuguard/internal/tasks/redis"
	"github.com/gpuguard/gpuguard/internal/tasks/taskstest"
)

var names atomic.Int64

func open(t *testing.T, url, name, consumer string) *redis.Store {
	t.Helper()
	s, err := redis.Open(url, name, consumer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	taskstest.Run(t, func(t *testing.T) taskstest.Opener {
		name := fmt.Sprintf("conf%d", names.Add(1))
		return func(t *testing.T) tasks.Store { return open(t, srv.URL(), name, "host-a") }
	})
}

// The queue lives in the stream the contract names, read through the
// consumer group "gpuguard".
func TestStreamAndGroup(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL(), "llama", "host-a")
	ctx := context.Background()
	now := time.Now()
	if err := s.Enqueue(ctx, api.Task{Ticket: "t-1", Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now}, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lease(ctx, "t-1", now); err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	defer c.Close()
	if typ := c.Type(ctx, "gpuguard:tasks:llama").Val(); typ != "stream" {
		t.Fatalf("gpuguard:tasks:llama is a %q, want a stream", typ)
	}
	groups, err := c.XInfoGroups(ctx, "gpuguard:tasks:llama").Result()
	if err != nil || len(groups) != 1 || groups[0].Name != "gpuguard" || groups[0].Pending != 1 {
		t.Fatalf("groups %+v %v, want gpuguard with 1 pending", groups, err)
	}
}

// Two hosts share one queue: a task enqueued on one is leased by the
// other, and one that a dead host held is taken over (XAUTOCLAIM) after
// the visibility timeout.
func TestTwoHostsShare(t *testing.T) {
	srv := redistest.Start(t)
	a := open(t, srv.URL(), "llama", "host-a")
	b := open(t, srv.URL(), "llama", "host-b")
	ctx := context.Background()
	now := time.Now()
	for i := range 2 {
		if err := a.Enqueue(ctx, api.Task{Ticket: fmt.Sprintf("t-%d", i), Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now.Add(time.Duration(i))}, 10); err != nil {
			t.Fatal(err)
		}
	}
	p, ok, _, err := b.Peek(ctx, now)
	if err != nil || !ok || p.Ticket != "t-0" {
		t.Fatalf("host b peeks %+v %v %v", p, ok, err)
	}
	if _, err := b.Lease(ctx, "t-0", now); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Lease(ctx, "t-0", now); !errors.Is(err, tasks.ErrNotQueued) {
		t.Fatalf("host a leases host b's task: %v", err)
	}
	// Host b dies; a restarted host a does not recover b's task...
	if got, _ := a.Recover(ctx, now, 5); len(got) != 0 {
		t.Fatalf("host a recovered %+v, host b's", got)
	}
	// ... but takes it over once it has been idle for the timeout.
	got, err := a.Expire(ctx, now.Add(2*time.Minute), time.Minute, 5)
	if err != nil || len(got) != 1 || got[0].Ticket != "t-0" || got[0].Attempts != 1 {
		t.Fatalf("host a expired %+v %v", got, err)
	}
	if _, err := a.Lease(ctx, "t-0", now.Add(2*time.Minute)); err != nil {
		t.Fatalf("host a leases the task it took over: %v", err)
	}
}

// kill -9 of redis-server mid-run: with appendfsync always, every task
// whose Enqueue returned is there after the restart, with its state.
func TestRedisKilledMidRun(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv.URL(), "llama", "host-a")
	ctx := context.Background()
	now := time.Now()
	var stored []string
	for i := range 50 {
		tk := api.Task{Ticket: fmt.Sprintf("t-%03d", i), Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now.Add(time.Duration(i))}
		if err := s.Enqueue(ctx, tk, 1000); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, tk.Ticket)
	}
	if _, err := s.Lease(ctx, "t-000", now); err != nil {
		t.Fatal(err)
	}
	if err := s.Ack(ctx, "t-000", []byte("ok"), now); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	// While it is down, every call fails (and says why); none hangs.
	err := s.Enqueue(ctx, api.Task{Ticket: "t-lost", Tool: "x", Priority: "P2", Bytes: 1, Enqueued: now}, 1000)
	if err == nil || !strings.Contains(err.Error(), "redis") {
		t.Fatalf("enqueue with redis down: %v, want an error naming redis", err)
	}
	srv.Restart()
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != len(stored) {
		t.Fatalf("after kill -9 and restart: %d tasks, want %d", len(list), len(stored))
	}
	for i, tk := range list {
		want := api.TaskQueued
		if i == 0 {
			want = api.TaskDone
		}
		if tk.Ticket != stored[i] || tk.State != want {
			t.Fatalf("task %d: %s %s, want %s %s", i, tk.Ticket, tk.State, stored[i], want)
		}
	}
	if _, err := s.Lease(ctx, "t-001", now); err != nil {
		t.Fatalf("lease after the restart: %v", err)
	}
}

// An unreachable Redis answers an error quickly, for a deny.
func TestUnreachable(t *testing.T) {
	s := open(t, "redis://127.0.0.1:1/0", "llama", "host-a")
	start := time.Now()
	err := s.Enqueue(context.Background(), api.Task{Ticket: "t-1", Tool: "x", Priority: "P2", Bytes: 1, Enqueued: start}, 10)
	if err == nil {
		t.Fatal("enqueue to an unreachable redis succeeded")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v to fail", d)
	}
}

func TestBadURL(t *testing.T) {
	if _, err := redis.Open("http://x", "n", "c"); err == nil {
		t.Fatal("opened an http URL")
	}
}
