package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const tasksPolicy = `
name = "tq"
command = ["/bin/sh", "-c", "echo child-up; exec sleep 600"]
[watch]
backend = "sim"
interval = "50ms"
[restart]
stop_timeout = "2s"
[defer]
ack_timeout = "1m"
`

// startTQ starts the tasks test's instance and waits for its child.
func startTQ(e *env, pol string) (*proc, *sockClient) {
	p := e.start([]string{"run", "--policy", pol})
	p.expect("child-up")
	return p, dialInstance(e.t, e.runDir, "tq")
}

func taskByTicket(list []map[string]any, ticket string) map[string]any {
	for _, t := range list {
		if t["ticket"] == ticket {
			return t
		}
	}
	return nil
}

// Crash tests with the real binary: SIGKILL between the deferral's reply
// and its delivery, during a delivery, and after done was acknowledged.
// No ticket is lost, and a task whose done was acknowledged never runs
// again.
func TestTasksSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(tasksPolicy)
	simDir := filepath.Join(e.stateDir, "sim")
	setSim(t, simDir, "other", "16106127360") // above high: P2 is deferred

	p, c := startTQ(e, pol)
	// Let a sample see the full GPU.
	rep := c.deferEmbed()
	ticket, _ := rep["ticket"].(string)
	if rep["decision"] != "defer" || len(ticket) < 32 {
		t.Fatalf("deferral: %v, want defer with a ticket", rep)
	}
	// 1. SIGKILL between the reply and the delivery.
	p.signal(syscall.SIGKILL)
	p.wait()
	if tk := taskByTicket(e.tasksJSON("tq"), ticket); tk == nil || tk["state"] != "queued" || tk["tool"] != "embed" {
		t.Fatalf("after SIGKILL: task %v, want it queued", tk)
	}

	// 2. SIGKILL during the delivery.
	p, c = startTQ(e, pol)
	if r := c.call(map[string]any{"type": "subscribe", "tasks": true}); r["ok"] != true {
		t.Fatalf("subscribe: %v", r)
	}
	setSim(t, simDir, "other", "0")
	d, ok := c.task(30 * time.Second)
	if !ok || d["ticket"] != ticket || d["attempt"] != float64(1) || d["lease"] == "" {
		t.Fatalf("delivery: %v, want %s attempt 1 with a lease", d, ticket)
	}
	if pl, _ := json.Marshal(d["payload"]); string(pl) != `{"doc":1}` {
		t.Fatalf("payload %s", pl)
	}
	p.signal(syscall.SIGKILL)
	p.wait()
	if tk := taskByTicket(e.tasksJSON("tq"), ticket); tk == nil || tk["state"] != "running" {
		t.Fatalf("killed during a delivery: task %v, want it still leased (running)", tk)
	}

	// The restart puts it back (an attempt counted) and delivers it again.
	p, c = startTQ(e, pol)
	c.call(map[string]any{"type": "subscribe", "tasks": true})
	d, ok = c.task(30 * time.Second)
	if !ok || d["ticket"] != ticket || d["attempt"] != float64(2) {
		t.Fatalf("after the restart: %v, want %s again, attempt 2", d, ticket)
	}
	st := c.call(map[string]any{"type": "status"})
	if st["tasks"] != float64(1) || st["leases"] != float64(1) {
		t.Fatalf("status tasks %v leases %v, want 1 and 1 (the delivery's lease)", st["tasks"], st["leases"])
	}
	// A done from another connection is refused.
	other := dialInstance(t, e.runDir, "tq")
	if r := other.call(map[string]any{"type": "done", "ticket": ticket}); r["ok"] != false || !strings.Contains(r["error"].(string), "not delivered to this connection") {
		t.Fatalf("done from another connection: %v", r)
	}
	// 3. done acknowledged, then SIGKILL: the task never runs again.
	if r := c.call(map[string]any{"type": "done", "ticket": ticket}); r["ok"] != true {
		t.Fatalf("done: %v", r)
	}
	p.signal(syscall.SIGKILL)
	p.wait()
	p, c = startTQ(e, pol)
	c.call(map[string]any{"type": "subscribe", "tasks": true})
	// A second task, deferred now: if the first were queued again it would
	// come first (oldest first); it must be the second that comes.
	setSim(t, simDir, "other", "16106127360")
	var second string
	deadline := time.Now().Add(30 * time.Second)
	for second == "" && time.Now().Before(deadline) {
		r := c.call(map[string]any{"type": "reserve", "bytes": 1 << 30, "priority": "P2", "tool": "second", "payload": 2})
		if r["decision"] == "defer" {
			second, _ = r["ticket"].(string)
		} else if l, _ := r["lease"].(string); l != "" {
			c.call(map[string]any{"type": "release", "lease": l})
		}
	}
	setSim(t, simDir, "other", "0")
	d, ok = c.task(30 * time.Second)
	if !ok || d["ticket"] != second {
		t.Fatalf("after done and SIGKILL: delivered %v, want the second task (%s), never the done one", d, second)
	}
	c.call(map[string]any{"type": "done", "ticket": second})
	list := e.tasksJSON("tq")
	if tk := taskByTicket(list, ticket); tk == nil || tk["state"] != "done" || tk["attempts"] != float64(1) {
		t.Fatalf("the first task: %v, want done with 1 attempt counted", tk)
	}
	p.signal(syscall.SIGTERM)
	p.wait()
	// The journal has the story.
	j := e.read(filepath.Join(e.stateDir, "events.jsonl"))
	for _, ev := range []string{`"event":"deferred"`, `"event":"task"`, `"event":"task_failed"`, `"event":"task_done"`} {
		if !strings.Contains(j, ev) {
			t.Errorf("journal lacks %s", ev)
		}
	}
}
