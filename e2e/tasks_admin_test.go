package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestTasksDropTellsTheInstance: `gpuguard tasks NAME drop TICKET` with
// the instance running removes the task from the shared store, the
// instance's status counts it off its queue at once (told over the
// socket; its own re-count comes only every 5 s), and the drop is
// journaled once; a retry of a task that is not dead fails (exit 1) and
// changes nothing.
func TestTasksDropTellsTheInstance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(tasksPolicy)
	setSim(t, filepath.Join(e.stateDir, "sim"), "other", "16106127360") // above high: P2 is deferred
	p, c := startTQ(e, pol)
	rep := c.deferEmbed()
	ticket, _ := rep["ticket"].(string)
	if rep["decision"] != "defer" || ticket == "" {
		t.Fatalf("deferral: %v, want defer with a ticket", rep)
	}
	args := func(action string) []string {
		return []string{"tasks", "tq", action, ticket, "--state-dir", e.stateDir, "--runtime-dir", e.runDir}
	}
	if code, out, stderr := e.runRaw(args("retry")); code != 1 || out != "" {
		t.Fatalf("retry of a queued task: exit %d, out %q, stderr %q; want exit 1 and nothing done", code, out, stderr)
	}
	code, out, stderr := e.runRaw(args("drop"))
	if code != 0 || !strings.Contains(out, "dropped "+ticket+" (embed, queued)") {
		t.Fatalf("drop: exit %d, out %q, stderr %q", code, out, stderr)
	}
	if tk := taskByTicket(e.tasksJSON("tq"), ticket); tk != nil {
		t.Fatalf("after the drop: %v still listed", tk)
	}
	if st := c.call(map[string]any{"type": "status"}); st["tasks"] != float64(0) {
		t.Fatalf("status tasks %v after the drop, want 0", st["tasks"])
	}
	p.signal(syscall.SIGTERM) // the journal is complete once the instance has ended
	p.wait()
	if ev := journalEvents(filepath.Join(e.stateDir, "events.jsonl"), "task_dropped"); len(ev) != 1 || !strings.Contains(ev[0], ticket) {
		t.Fatalf("task_dropped events %q, want one, journaled by the instance", ev)
	}
}
