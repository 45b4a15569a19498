package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lateHandler is a child that installs its SIGUSR1 handler late, as a
// server does after importing its framework (torch alone takes about a
// second). It installs it once the test creates $OUT.go, so the step
// surely comes first, then reads the state file and reports every
// notification.
const lateHandler = `trap 'exit 0' TERM
echo "up $$$$"
until [ -e "$OUT.go" ]; do sleep 0.02; done
trap 'echo "notified $(cat "$GPUGUARD_STATE")"' USR1
echo "handler $(cat "$GPUGUARD_STATE")"
while :; do sleep 0.02; done
`

// TestLiveChangeNeverKillsAStartingChild: a step while the child has no
// handler for the notify signal does not kill it. The signal is skipped,
// journaled and counted; the state file carries the change, and the child
// reads level 1 there once its handler is in. From then on it gets the
// signal exactly once per change.
func TestLiveChangeNeverKillsAStartingChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pol := e.policy(ladder)
	addr := freeLoopbackAddr(t)
	p := e.start(append([]string{"run", "--policy", pol, "--name", "late", "--metrics-addr", addr}, sh(lateHandler)...))
	p.expect("up ")
	stepTo := func(dir, want string) {
		t.Helper()
		code, out, stderr := e.run([]string{"step", "late", dir, "--runtime-dir", e.runDir})
		if code != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("step %s: exit %d, %q, %s", dir, code, out, stderr)
		}
	}
	stepTo("down", "int8")
	waitFor(t, "the skip in the journal", 30*time.Second, func() bool { return len(events(e, "notify_skipped")) == 1 })
	if n := pfMetric(t, addr, "gpuguard_notify_skipped_total"); n != 1 {
		t.Errorf("gpuguard_notify_skipped_total %d, want 1", n)
	}
	if err := os.WriteFile(e.path("out.go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Seq   int    `json:"seq"`
		Level int    `json:"level"`
		Prof  string `json:"profile"`
	}
	l := p.expect("handler ")
	if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "handler ")), &st); err != nil || st.Level != 1 || st.Prof != "int8" || st.Seq != 2 {
		t.Fatalf("the child read %q (%v), want level 1 (int8), seq 2", l, err)
	}
	stepTo("down", "int4")
	if l := p.expect("notified "); !strings.Contains(l, `"level":2`) {
		t.Errorf("first notification: %s", l)
	}
	stepTo("up", "int8")
	if l := p.expect("notified "); !strings.Contains(l, `"level":1`) {
		t.Errorf("second notification: %s", l)
	}
	p.signal(syscall.SIGTERM)
	var rest []string
	for l := range p.lines {
		rest = append(rest, l)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, p.stderr.String())
	}
	for _, l := range rest {
		if strings.HasPrefix(l, "notified") {
			t.Errorf("a notification more than once per change: %s", l)
		}
	}
	count := map[string]int{}
	for _, ev := range journal(t, e) {
		count[ev["event"].(string)]++
	}
	if count["start"] != 1 || count["restart"] != 0 || count["notify_skipped"] != 1 || count["stepdown"] != 2 || count["stepup"] != 1 {
		t.Errorf("journal events %v, want one start, no restart, one notify_skipped", count)
	}
	if !strings.Contains(p.stderr.String(), "SIGUSR1 not sent to the child") {
		t.Errorf("the skip was not logged:\n%s", p.stderr.String())
	}
}

// TestCommandThatCannotRun: a command that is not found exits 127, one
// that is found but cannot be executed 126, as env and nohup do, with one
// line on stderr naming it, and nothing started.
func TestCommandThatCannotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notExec := e.path("notexec.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho started\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noShebang := e.path("noshebang")
	if err := os.WriteFile(noShebang, []byte("echo started\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cmd  string
		code int
		line string
	}{
		{"not in PATH", "gpuguard-no-such-cmd", 127, `gpuguard: cannot run "gpuguard-no-such-cmd": command not found in PATH=/nonexistent:/bin`},
		{"no such file", e.path("nope"), 127, `gpuguard: cannot run "` + e.path("nope") + `": ` + e.path("nope") + `: no such file or directory`},
		{"not executable", notExec, 126, `gpuguard: cannot run "` + notExec + `": ` + notExec + ` is not executable (mode -rw-r--r--)`},
		{"a directory", e.dir, 126, `gpuguard: cannot run "` + e.dir + `": ` + e.dir + ` is a directory`},
		{"exec format error", noShebang, 126, `gpuguard: cannot run "` + noShebang + `": exec format error`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := filepath.Join(e.dir, "state-"+strings.ReplaceAll(tc.name, " ", "-"))
			code, out, stderr := e.run([]string{"run", "--backend", "sim", "--name", "cr", "--state-dir", state,
				"--", tc.cmd, "arg"}, "PATH=/nonexistent:/bin")
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], tc.line) {
				t.Fatalf("stderr %q, want one line starting %q", stderr, tc.line)
			}
			if out != "" {
				t.Errorf("stdout %q: something ran", out)
			}
			if tc.name == "exec format error" {
				return // only the exec could tell: the state file was written for it
			}
			if _, err := os.Stat(filepath.Join(state, "state.json")); !os.IsNotExist(err) {
				t.Errorf("a state file was written for a command that cannot run (%v)", err)
			}
			if b, _ := os.ReadFile(filepath.Join(state, "events.jsonl")); strings.Contains(string(b), `"event":"start"`) {
				t.Errorf("a start was journaled:\n%s", b)
			}
		})
	}
}
