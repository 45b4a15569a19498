package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/control"
)

// TestJournalFloodKeepsTheRun is the flood through the real binary:
// many granted reservations over the socket, a step-down, then enough
// denied ones (each its own line) to rotate a 64 KiB journal many times
// past its one kept file. The start and the step-down rotate away;
// `report --json` still counts the step-down, every admission, and the
// supervised time in both profiles.
func TestJournalFloodKeepsTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder + "\n[journal]\nmax_size = \"64KiB\"\nmax_files = 1\n")
	script := `trap 'exit 0' TERM; trap 'echo notified' USR1; echo up; while :; do sleep 0.02; done`
	began := time.Now()
	p := e.start(append([]string{"run", "--policy", pol, "--name", "svc"}, sh(script)...))
	p.expect("up")
	up := time.Now()

	ctx := withTimeout(t, 60*time.Second)
	c, err := control.Dial(ctx, filepath.Join(e.runDir, "svc.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reserve := func(n int, bytes float64, prio, want string) {
		t.Helper()
		for range n {
			r, err := c.Request(ctx, map[string]any{"type": "reserve", "bytes": bytes, "priority": prio, "tool": "agent"})
			if err != nil || r["decision"] != want {
				t.Fatalf("reserve %v %s: %v %v, want %s", bytes, prio, r, err, want)
			}
		}
	}
	const granted, denied = 2000, 1000
	reserve(granted/2, 1, "P1", "gpu")
	if code, out, stderr := e.run([]string{"step", "svc", "down", "--runtime-dir", e.runDir}); code != 0 || strings.TrimSpace(out) != "int8" {
		t.Fatalf("step down: %d %q %s", code, out, stderr)
	}
	reserve(denied, 1e15, "P0", "deny")
	reserve(granted/2, 1, "P1", "gpu")
	term := time.Now()
	p.signal(15)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	ended := time.Now()

	var lines []string
	for _, name := range []string{"events.jsonl.1", "events.jsonl"} {
		lines = append(lines, strings.Split(strings.TrimSpace(e.read(filepath.Join(e.stateDir, name))), "\n")...)
	}
	if _, err := os.Stat(filepath.Join(e.stateDir, "events.jsonl.2")); err == nil {
		t.Error("events.jsonl.2 exists: max_files = 1 not honoured")
	}
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("journal line %q: %v", l, err)
		}
		if ev["event"] == "start" || ev["event"] == "stepdown" {
			t.Fatalf("the journal still holds the %s line: it did not rotate it away", ev["event"])
		}
		if ev["event"] == "admission" && ev["decision"] == "gpu" && ev["count"] == nil {
			t.Fatalf("a granted admission journaled on its own: %s", l)
		}
	}

	code, out, stderr := e.run([]string{"report", "svc", "--json", "--state-dir", e.stateDir, "--runtime-dir", e.runDir})
	if code != 0 {
		t.Fatalf("report: %d %s", code, stderr)
	}
	var rep struct {
		Stepdowns        int                `json:"stepdowns"`
		Admissions       map[string]int     `json:"admissions"`
		SecondsInProfile map[string]float64 `json:"seconds_in_profile"`
		Supervised       float64            `json:"supervised_seconds"`
		FirstProfile     string             `json:"first_profile"`
		FallbackRate     float64            `json:"fallback_rate"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, out)
	}
	if rep.Stepdowns != 1 || rep.Admissions["gpu"] != granted || rep.Admissions["deny"] != denied || rep.FirstProfile != "fp16" {
		t.Errorf("report: stepdowns %d, admissions %v, first profile %q; want 1, %d gpu and %d deny, fp16\n%s",
			rep.Stepdowns, rep.Admissions, rep.FirstProfile, granted, denied, out)
	}
	// The child ran at least from its "up" to the stop signal, at most
	// while gpuguard did.
	if lo, hi := term.Sub(up).Seconds(), ended.Sub(began).Seconds(); rep.Supervised < lo || rep.Supervised > hi ||
		rep.SecondsInProfile["fp16"] <= 0 || rep.SecondsInProfile["int8"] <= 0 || rep.FallbackRate <= 0 {
		t.Errorf("supervised %v s (want %.2f .. %.2f), seconds_in_profile %v, fallback rate %v",
			rep.Supervised, lo, hi, rep.SecondsInProfile, rep.FallbackRate)
	}
}
