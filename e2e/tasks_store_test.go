package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/internal/redistest"
)

// deferOnce reserves P2 with a payload until a sample has seen the full
// GPU (a grant is released), and returns the reply.
func deferOnce(t *testing.T, c *sockClient, tool string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.call(map[string]any{"type": "reserve", "bytes": 1 << 30, "priority": "P2", "tool": tool, "payload": map[string]any{"t": tool}})
		if r["decision"] != "gpu" || time.Now().After(deadline) {
			return r
		}
		c.call(map[string]any{"type": "release", "lease": r["lease"]})
	}
}

const fullGPU = "16106127360" // 15 GiB of the sim's 16: above high

// An unreachable Redis never stops the instance: the deferral is denied
// with the reason, and no ticket is given.
func TestTasksUnreachableRedisDenies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(strings.Replace(tasksPolicy, "[defer]\n", "[defer]\nstore = \"redis://127.0.0.1:1/0\"\n", 1))
	setSim(t, filepath.Join(e.stateDir, "sim"), "other", fullGPU)
	p, c := startTQ(e, pol)
	r := deferOnce(t, c, "x")
	if r["decision"] != "deny" || r["ticket"] != nil || !strings.Contains(fmt.Sprint(r["reason"]), "redis") {
		t.Fatalf("with redis unreachable: %v, want deny naming redis and no ticket", r)
	}
	if st := c.call(map[string]any{"type": "status"}); st["state"] != "running" {
		t.Fatalf("the instance is %v", st["state"])
	}
	p.signal(syscall.SIGTERM)
	p.wait()
}

// A full disk: the deferral is denied with the reason and no ticket;
// once there is room again, deferrals get tickets.
func TestTasksFullDiskDenies(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	e := newEnv(t)
	pol := e.policy(tasksPolicy)
	deferred := filepath.Join(e.stateDir, "deferred")
	if err := os.MkdirAll(deferred, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", deferred, "tmpfs", 0, "size=256k,mode=0700"); err != nil {
		t.Skipf("mount not permitted: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(deferred, syscall.MNT_DETACH) })
	filler := filepath.Join(deferred, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			break // ENOSPC: the disk is full
		}
	}
	f.Close()
	setSim(t, filepath.Join(e.stateDir, "sim"), "other", fullGPU)
	p, c := startTQ(e, pol)
	r := deferOnce(t, c, "x")
	if r["decision"] != "deny" || r["ticket"] != nil || !strings.Contains(fmt.Sprint(r["reason"]), "could not be stored") {
		t.Fatalf("on a full disk: %v, want deny with the reason and no ticket", r)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r = deferOnce(t, c, "y")
	if r["decision"] != "defer" || r["ticket"] == nil {
		t.Fatalf("with room again: %v, want a ticket", r)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
	if list := e.tasksJSON("tq"); len(list) != 1 || list[0]["ticket"] != r["ticket"] {
		t.Fatalf("stored %v, want the one task that got a ticket", list)
	}
}

// Two instances of one name on a real Redis share a queue: a task
// deferred on one (no memory there) runs on the other (memory free).
func TestTasksTwoInstancesShareRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a, b := newEnv(t), newEnv(t)
	pol := strings.Replace(tasksPolicy, "[defer]\n", "[defer]\nstore = \""+srv.URL()+"\"\n", 1)
	polA, polB := a.policy(pol), b.policy(pol)
	setSim(t, filepath.Join(a.stateDir, "sim"), "other", fullGPU)
	pa, ca := startTQ(a, polA)
	pb, cb := startTQ(b, polB)
	cb.call(map[string]any{"type": "subscribe", "tasks": true})
	r := deferOnce(t, ca, "shared")
	ticket, _ := r["ticket"].(string)
	if r["decision"] != "defer" || ticket == "" {
		t.Fatalf("deferral on a: %v", r)
	}
	d, ok := cb.task(30 * time.Second)
	if !ok || d["ticket"] != ticket {
		t.Fatalf("b got %v, want a's task %s", d, ticket)
	}
	if r := cb.call(map[string]any{"type": "done", "ticket": ticket}); r["ok"] != true {
		t.Fatalf("done on b: %v", r)
	}
	if tk := taskByTicket(a.tasksJSON("tq"), ticket); tk == nil || tk["state"] != "done" {
		t.Fatalf("a lists %v, want it done", tk)
	}
	pa.signal(syscall.SIGTERM)
	pb.signal(syscall.SIGTERM)
	pa.wait()
	pb.wait()
}
